/**
 * The planner's settings: defaults and validation. A setting that is wrong is named with what was expected, so a
 * bad configuration is refused at start instead of making the rebalancer oscillate or stall.
 */
import { bandsProblem, DEFAULT_BANDS, type Bands } from './bands';
import type { PlannerConfig, ScoreWeights } from './types';

export const DEFAULT_PLANNER_CONFIG: PlannerConfig = {
  weights: { owned: 1, followed: 1, history: 1, traffic: 1, sync: 1 },
  historyHalfBytes: 64 * 1024 * 1024,
  threshold: 0.1,
  bands: DEFAULT_BANDS,
  minImprovement: 0.001,
  maxTransfersPerNode: 2,
  maxTransfersPerCluster: 8,
  nodeCooldownMs: 60_000,
  partitionCooldownMs: 300_000,
  syncBytesPerSec: 4 * 1024 * 1024,
  replaceAfterMs: 600_000,
};

const WEIGHTS: (keyof ScoreWeights)[] = ['owned', 'followed', 'history', 'traffic', 'sync'];

function finite(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

/** The first problem with `c` in words (the setting's name, its value, what is expected), or null when it is valid. */
export function validatePlannerConfig(c: PlannerConfig): string | null {
  for (const w of WEIGHTS) {
    const v = c.weights[w];
    if (!finite(v) || v < 0) return `weights.${w} is ${String(v)}: expected a finite number >= 0`;
  }
  if (WEIGHTS.every((w) => c.weights[w] === 0)) return 'weights are all 0: expected at least one weight above 0';
  if (!finite(c.historyHalfBytes) || c.historyHalfBytes <= 0)
    return `historyHalfBytes is ${String(c.historyHalfBytes)}: expected bytes > 0 (k of h / (h + k))`;
  if (!finite(c.threshold) || c.threshold <= 0)
    return `threshold is ${String(c.threshold)}: expected a number > 0 (a threshold of 0 makes nodes trade copies back and forth)`;
  const bands = bandsProblem(c.bands ?? {});
  if (bands !== null) return bands;
  if (!finite(c.minImprovement) || c.minImprovement <= 0)
    return `minImprovement is ${String(c.minImprovement)}: expected a number > 0 (a margin of 0 lets moves that change nothing repeat forever)`;
  for (const k of ['maxTransfersPerNode', 'maxTransfersPerCluster'] as const) {
    const v = c[k];
    if (!Number.isInteger(v) || v < 1) return `${k} is ${String(v)}: expected an integer >= 1`;
  }
  for (const k of ['nodeCooldownMs', 'partitionCooldownMs', 'replaceAfterMs'] as const) {
    const v = c[k];
    if (!finite(v) || v < 0) return `${k} is ${String(v)}: expected milliseconds >= 0`;
  }
  if (!finite(c.syncBytesPerSec) || c.syncBytesPerSec <= 0)
    return `syncBytesPerSec is ${String(c.syncBytesPerSec)}: expected bytes per second > 0`;
  return null;
}

/** The bands a config asks for, defaults filled in. */
export function bandsOf(c: PlannerConfig): Bands {
  return { ...DEFAULT_BANDS, ...c.bands };
}
