/** Every workflow the worker registers. */
export { followerMoveV2 } from './follower-move-v2';
export { progressRelay } from './relay';
export { ownerHandoff } from './owner-handoff';
export { ownerMove } from './owner-move';
export { replicationIncrease } from './replication-increase';
export { followerReplacement } from './follower-replacement';
export { rebalancer } from './rebalancer';
export { drain } from './drain';
