/**
 * The planner's entry points: planNow (what to start now within the limits) and planToConvergence (the whole
 * ordered plan, tick after tick on the predicted topology, with the spread it reaches and the time it takes).
 * Pure: the input is a topology snapshot, the moves in flight, cooldowns and a clock.
 */
import { dimensionReport, nodeBands } from './bands';
import { bandsOf, validatePlannerConfig } from './config';
import { proposeTick } from './policy';
import type { KeptReading } from './kept';
import { movesOnce, netSteps } from './net';
import { ClusterState } from './state';
import { TickPlanner, type TickContext } from './tick';
import type { DimensionReport, NodeScore, Plan, PlanInput, PlannerConfig, Proposal } from './types';

function checked(config: PlannerConfig): PlannerConfig {
  const problem = validatePlannerConfig(config);
  if (problem !== null) throw new Error(`invalid planner config: ${problem}`);
  return config;
}

function start(input: PlanInput, config: PlannerConfig, kept?: KeptReading): { st: ClusterState; ctx: TickContext } {
  const st = new ClusterState(input, checked(config), new Set(input.draining ?? []), kept);
  const ctx: TickContext = {
    config,
    now: input.now,
    cooldowns: input.cooldowns,
    inFlight: input.inFlight.length,
    followerMovesInFlight: input.inFlight.some((m) => m.op !== 'owner_handoff'),
    repair: input.repair ?? true,
    drainedElsewhere: new Set(input.drainedElsewhere ?? []),
    moved: new Map(),
    formerOwners: new Map(),
  };
  return { st, ctx };
}

/**
 * Time to copy `steps` when each node receives at `syncBytesPerSec` (shared by its transfers) and at most
 * maxTransfersPerCluster transfers run at once: the busiest receiver, or the whole volume over the receivers the
 * cluster limit lets run together, whichever is longer. Handoffs copy nothing and are not counted.
 */
export function predictMs(steps: readonly Proposal[], config: PlannerConfig): number {
  const inbound = new Map<string, number>();
  let total = 0;
  for (const s of steps) {
    if (s.op === 'owner_handoff') continue;
    inbound.set(s.to, (inbound.get(s.to) ?? 0) + s.bytes);
    total += s.bytes;
  }
  if (total === 0) return 0;
  const busiest = Math.max(...inbound.values());
  const parallel = Math.min(config.maxTransfersPerCluster, inbound.size);
  return (1000 * Math.max(busiest, total / parallel)) / config.syncBytesPerSec;
}

function plan(st: ClusterState, config: PlannerConfig, t0: number, before: number, steps: Proposal[], idle: string | null): Plan {
  return {
    planningMs: performance.now() - t0,
    steps,
    spreadBefore: before,
    spreadAfter: st.spread(),
    mean: st.mean,
    threshold: config.threshold,
    predictedMs: predictMs(steps, config),
    idleReason: idle,
    dimensions: dimensionReport(st, bandsOf(config)),
  };
}

/**
 * What to start now: proposals within the transfer limits, cooldowns and the recovery pause, in order. A caller
 * that plans every tick keeps the reading of the records (`kept`) from one plan to the next.
 */
export function planNow(input: PlanInput, config: PlannerConfig, kept?: KeptReading): Plan {
  const t0 = performance.now();
  const { st, ctx } = start(input, config, kept);
  const before = st.spread();
  const tick = proposeTick(st, ctx);
  return plan(st, config, t0, before, tick.proposals, tick.idleReason);
}

/**
 * Rounds planned again on what the plan leaves, its memory of moved replicas and former owners cleared, as the loop
 * plans once its cooldowns end. The random clusters of the planner's properties settle within three.
 */
const SETTLING_ROUNDS = 4;

/** What the first tick of a plan proposes: planNow on the same input, what the loop starts next. */
type FirstTick = Pick<Plan, 'steps' | 'idleReason'>;

/**
 * Every step to convergence, in order: planNow repeated on the predicted topology (each tick's moves done, its
 * transfers over, the clock advanced by the tick's predicted time) until nothing is proposed. A replica that moved
 * never moves again or back within a round, so a round ends. Then settling rounds, and the steps netted
 * (`netSteps`): a copy the loop would move on once its cooldown ends goes straight where it ends, so the plan ends
 * where planning again proposes nothing. A round whose net steps would move a replica twice or back is not taken.
 */
export function planToConvergence(input: PlanInput, config: PlannerConfig): Plan {
  return planWithFirstTick(input, config).plan;
}

/**
 * planToConvergence and its first tick, which is planNow on the same input: the dry run shows both, and building
 * the state once instead of twice saves it a tenth of a second at 100,000 partitions.
 */
export function planWithFirstTick(input: PlanInput, config: PlannerConfig): { plan: Plan; first: FirstTick } {
  const t0 = performance.now();
  const { st, ctx } = start(input, config);
  const before = st.spread();
  const steps: Proposal[] = [];
  const first = round(st, ctx, steps);
  let done = plan(st, config, t0, before, netSteps(steps), steps.length === 0 ? first.idleReason : null);
  // Each round's plan is built before the next starts: the state has no undo.
  for (let r = 1; r <= SETTLING_ROUNDS && steps.length > 0; r++) {
    ctx.moved = new Map();
    ctx.formerOwners = new Map();
    st.rezone();
    const count = steps.length;
    round(st, ctx, steps);
    if (steps.length === count) break;
    const net = netSteps(steps);
    if (!movesOnce(net)) break;
    done = plan(st, config, t0, before, net, null);
  }
  return { plan: { ...done, planningMs: performance.now() - t0 }, first };
}

/** One round: ticks planned and carried out on `st` until one proposes nothing; its first tick. */
function round(st: ClusterState, ctx: TickContext, steps: Proposal[]): FirstTick {
  // Each replica moves at most once and ownership never returns within a round, so a longer round means a broken rule.
  const bound = 2 * st.copyCount.reduce((a, c) => a + c, 0);
  let first: FirstTick | undefined;
  for (let found = 0; ; ) {
    if (found > bound) throw new Error(`planner did not converge: ${found} steps for ${st.partCount} partitions`);
    const tick = proposeTick(st, ctx);
    first ??= { steps: [...tick.proposals], idleReason: tick.idleReason };
    if (tick.proposals.length === 0) return first;
    steps.push(...tick.proposals);
    found += tick.proposals.length;
    st.settleTransfers();
    ctx.inFlight = 0;
    ctx.followerMovesInFlight = false;
    ctx.now += predictMs(tick.proposals, ctx.config);
  }
}

/** The score vector of every node, for operators (status, dashboard); a long-lived caller keeps its reading (`kept`). */
export function scoreNodes(input: PlanInput, config: PlannerConfig, kept?: KeptReading): { mean: number; nodes: NodeScore[] } {
  const { st } = start(input, config, kept);
  const bands = bandsOf(config);
  return { mean: st.mean, nodes: st.scores().map((s, i) => ({ ...s, bands: st.stays(st.nodes[i]!) ? nodeBands(st, bands, st.nodes[i]!) : null })) };
}

/** Each dimension's worst node against its band (see bands.ts), for the planner benchmark and operators. */
export function dimensionBands(input: PlanInput, config: PlannerConfig): DimensionReport[] {
  const { st } = start(input, config);
  return dimensionReport(st, bandsOf(config));
}

/**
 * The nodes that stay above the band however the planner moves (see `TickPlanner.zoneBound`), each with why: what
 * is left on them is what their zone must hold, so the settle benchmark reads them as the cluster's limit.
 */
export function zoneBoundNodes(input: PlanInput, config: PlannerConfig): { node: string; reason: string }[] {
  const { st, ctx } = start(input, config);
  const tp = new TickPlanner(st, ctx);
  const out: { node: string; reason: string }[] = [];
  for (const n of st.nodes) {
    const reason = st.stays(n) && tp.dev(n) > config.threshold ? tp.zoneBound(n) : null;
    if (reason !== null) out.push({ node: n.id, reason });
  }
  return out;
}
