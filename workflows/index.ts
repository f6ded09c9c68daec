/** Every workflow the worker registers. */
export { followerMoveV2, followerMoveV3 } from './follower-move';
export { progressRelay } from './relay';
export { ownerHandoff } from './owner-handoff';
export { ownerMove } from './owner-move';
export { replicationIncrease } from './replication-increase';
export { followerReplacement } from './follower-replacement';
export { rebalancer } from './rebalancer';
export { drain } from './drain';
