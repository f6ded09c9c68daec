/** Every workflow the worker registers. */
export { followerMove } from './follower-move';
export { progressRelay } from './relay';
export { rebalancer } from './rebalancer';
export { drain } from './drain';
