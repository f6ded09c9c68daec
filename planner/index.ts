/** The planner's public face: pure functions over a topology snapshot (see planner/types.ts for the vocabulary). */
export { DEFAULT_PLANNER_CONFIG, validatePlannerConfig } from './config';
export { bandWords, DEFAULT_BANDS, DIMENSIONS, type Bands, type Dimension, type DimensionReport } from './bands';
export { dimensionBands, planNow, planToConvergence, planWithFirstTick, predictMs, scoreNodes, zoneBoundNodes } from './plan';
export { liveCopies, lostReason, underReplicated, type UnderReplicated } from './repair';
export { checkSnapshot, topologyProblem, type SnapshotCheck } from './snapshot';
export type * from './types';
