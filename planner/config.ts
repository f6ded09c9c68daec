/**
 * The planner's settings: defaults and validation. A setting that is wrong is named with what was expected, so a
 * bad configuration is refused at start instead of making the rebalancer oscillate or stall.
 */
import { DIMENSIONS, type Bands, type Dimension, type PlannerConfig, type ScoreWeights } from './types';

/**
 * Copies and bytes within 5% of the share; owner roles and traffic within 10%, as handoffs, which carry most of
 * them, close admission while they run.
 */
export const DEFAULT_BANDS: Bands = { replicas: 0.05, owned: 0.1, disk: 0.05, traffic: 0.1 };

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


/** Parses `replicas=0.05,disk=0.05,owned=0.1,traffic=0.1` (any subset): the names and what each must be, on error. */
export function parseBands(text: string): { ok: true; bands: Partial<Bands> } | { ok: false; problem: string } {
  const out: Partial<Bands> = {};
  for (const pair of text.split(',')) {
    const [name, value, extra] = pair.split('=');
    if (!(DIMENSIONS as readonly string[]).includes(name ?? '') || value === undefined || extra !== undefined)
      return { ok: false, problem: `"${pair}": expected name=fraction pairs separated by commas, names among ${DIMENSIONS.join(', ')}, for example replicas=0.05,owned=0.1` };
    const v = Number(value);
    if (value.trim() === '' || !Number.isFinite(v)) return { ok: false, problem: `${name}=${value}: expected a fraction of the share, for example 0.05` };
    out[name as Dimension] = v;
  }
  return { ok: true, bands: out };
}

/** The first problem with a band setting in words, or null: a band of 0 (or below) would have nodes trade copies forever. */
export function bandsProblem(bands: Partial<Bands>): string | null {
  for (const d of DIMENSIONS) {
    const v = bands[d];
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v >= 1)
      return `bands.${d} is ${String(v)}: expected a fraction above 0 and below 1 (a band of 0 makes nodes trade copies back and forth)`;
  }
  return null;
}
