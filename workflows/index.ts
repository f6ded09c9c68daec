/** Every workflow the worker registers. */
export { followerMove } from './follower-move';
export { followerMoveV2 } from './follower-move-v2';
export { progressRelay } from './relay';
export { rebalancer } from './rebalancer';
export { drain } from './drain';
