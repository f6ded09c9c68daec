/**
 * The dry run of `rebalancer plan`, the admin API and the dashboard: while the loop runs it plans on the loop's own
 * input (its live cooldowns and tracked moves in flight, through `planInputFor`) and picks what starts now with the
 * loop's `selectStarts` (its pins and exclusions too), so its "now" is what the loop starts on its next tick; without a loop, on the broker's view.
 */
import type { Topology, Transfer } from '../cluster/contract';
import { planWithFirstTick } from '../planner';
import type { Cooldowns, Plan, PlanInput, PlannerConfig, Proposal } from '../planner/types';
import type { RebalancerStatus } from '../rules/definitions';
import { planInputFor } from '../rules/rebalancer-drain-rules';
import { activeNodes, cooldownsOnArrival, inFlightMoves, planHolds, pruneCooldowns, recoveryPending, selectStarts } from '../rules/rebalancer-rules';

export interface LoopView {
  /** running or paused: planned as the loop plans; absent: no loop answered, planned on the broker's view alone. */
  state: 'running' | 'paused' | 'absent';
  /** What the plan was made with, in words (the text output's line). */
  summary: string;
  /** The loop's cooldowns the plan honoured (none when absent). */
  cooldowns: Cooldowns;
  /** Moves in flight the plan counted. */
  inFlight: number;
}

export interface DryRun extends Plan {
  /** The steps the loop starts on its next tick: none while it is paused or a recovery is pending. */
  now: Proposal[];
  startNow: number;
  /** While the loop is paused: what its first tick after a resume starts. */
  onResume: Proposal[];
  loop: LoopView;
}

const NO_COOLDOWNS: Cooldowns = { nodes: {}, partitions: {}, moves: {} };

function summary(loop: RebalancerStatus | null, cooldowns: Cooldowns, inFlight: number, absentWhy: string): string {
  if (!loop) return `planned on the broker's view alone, without the loop's cooldowns: ${absentWhy}`;
  const parts = Object.keys(cooldowns.moves ?? {}).length + Object.keys(cooldowns.partitions).length;
  const held = `planned with the loop's live cooldowns (${parts} partition(s), ${Object.keys(cooldowns.nodes).length} node(s)) and its ${inFlight} move(s) in flight`;
  return loop.paused ? `${held}; the loop is paused by ${loop.paused.by} (${loop.paused.reason}): nothing starts until a resume` : `${held}; the loop is running`;
}

/**
 * `loop`: the loop's status when it answered, else null (`absentWhy` says why). `now` is the loop's clock (its
 * cooldowns' clock) when it runs; without it the plan has no cooldowns and plans at the topology's clock.
 */
export function dryRun(topology: Topology, transfers: Transfer[], loop: RebalancerStatus | null, config: PlannerConfig, now: number, absentWhy = 'no loop runs'): DryRun {
  let input: PlanInput;
  let cooldowns = NO_COOLDOWNS;
  if (loop) {
    // As the loop's next look will: a node that arrived since its last one lifts the node cooldowns.
    cooldowns = cooldownsOnArrival(pruneCooldowns(loop.cooldowns, now), loop.activeNodes, activeNodes(topology));
    input = planInputFor(topology, { inFlight: inFlightMoves(topology.partitions, loop.inFlight, transfers), cooldowns, now, ...planHolds(loop) });
  } else {
    // A drain plans with its node draining: without a loop the dry run shows the drains' steps too.
    const draining = topology.nodes.filter((n) => n.draining).map((n) => n.id);
    input = planInputFor(topology, { inFlight: inFlightMoves(topology.partitions, [], transfers), cooldowns: NO_COOLDOWNS, now: topology.now, draining });
  }
  const { plan, first } = planWithFirstTick(input, config);
  // The loop starts nothing while a recovery is pending, and leaves draining nodes to their drains.
  const leaveAlone = new Set(loop ? topology.nodes.filter((n) => n.draining).map((n) => n.id) : []);
  const selected = recoveryPending(topology.partitions) ? [] : selectStarts(first.steps, input.inFlight, config, leaveAlone).start;
  const paused = loop?.paused != null;
  const startsNow = paused ? [] : selected;
  const idleReason = plan.idleReason ?? (startsNow.length === 0 && first.idleReason ? first.idleReason : null);
  return {
    ...plan,
    idleReason,
    now: startsNow,
    startNow: startsNow.length,
    onResume: paused ? selected : [],
    loop: { state: loop ? (paused ? 'paused' : 'running') : 'absent', summary: summary(loop, cooldowns, input.inFlight.length, absentWhy), cooldowns, inFlight: input.inFlight.length },
  };
}

/** Whether `step` is one of `steps` (same op, partition and nodes). */
export function sameStep(steps: readonly Proposal[], step: Proposal): boolean {
  return steps.some((s) => s.op === step.op && s.partition === step.partition && s.from === step.from && s.to === step.to);
}
