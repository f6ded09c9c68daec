/** The planner's public face: pure functions over a topology snapshot (see planner/types.ts for the vocabulary). */
export { DEFAULT_PLANNER_CONFIG, validatePlannerConfig } from './config';
export { bandWords } from './bands';
export { DEFAULT_BANDS } from './config';
export { DIMENSIONS, type Bands, type Dimension, type DimensionReport } from './types';
export { KeptReading } from './kept';
export { dimensionBands, planNow, planToConvergence, planWithFirstTick, predictMs, scoreNodes, zoneBoundNodes } from './plan';
export { liveCopies, lostReason, underReplicated, type UnderReplicated } from './lost';
export { checkSnapshot, topologyProblem, type SnapshotCheck } from './snapshot';
export type * from './types';
