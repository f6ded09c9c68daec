/**
 * `npm run bench -- payloads [--nodes N] [--partitions P] [--moves M] [--cooled C]`: the size of every payload the
 * loop hands Temporal at 1,000 nodes, 100,000 partitions and 1,000 moves in flight (issue 20, item 4), each beside
 * the 512 KB Temporal warns at. A part: the payloads are built in memory with the loop's own rules, the planner and
 * Temporal's payload converter, the moves' bookkeeping filled as a loop at that size would fill it; no broker, no
 * server. What grows with what is printed too, so the bound each needs can be read off.
 */
import { defaultPayloadConverter } from '@temporalio/common';
import type { Topology } from '../cluster/contract';
import { DEFAULT_PLANNER_CONFIG, planNow, planToConvergence, type InFlightMove, type Plan, type Proposal } from '../planner';
import { firstSteps } from '../activities/rebalancer';
import { approvalRecord, basisOf, PAST_PLANS, proposalOf } from '../rules/rebalancer-approval';
import { reconfigurationWorkflowId, type ApprovalState, type RebalancerSettings, type RebalancerState, type TrackedMove } from '../rules/definitions';
import { nodeCooldowns, planRecord, type ClosedReconfiguration } from '../rules/rebalancer-rules';
import { large } from './planner';
import { round } from './stats';

/** Temporal's warning for one payload (the server refuses past 2 MB by default). */
const WARN_BYTES = 512 * 1024;

/** Bytes of one argument or result as Temporal's default converter encodes it (data and metadata). */
function payloadBytes(value: unknown): number {
  const p = defaultPayloadConverter.toPayload(value);
  let meta = 0;
  for (const [k, v] of Object.entries(p.metadata ?? {})) meta += k.length + v.length;
  return (p.data?.length ?? 0) + meta;
}

const kb = (x: number): number => round(x / 1024, 1);

/** The steps a loop at this size would have started: the first `count` follower moves of the plan to convergence. */
function stepsInFlight(topology: Topology, plan: Plan, count: number): Proposal[] {
  const steps = plan.steps.filter((s) => s.op !== 'owner_handoff');
  if (steps.length >= count) return steps.slice(0, count);
  // Fewer follower moves than asked: the rest repeat them on other partitions, as a larger join would plan.
  return Array.from({ length: count }, (_, i) => ({ ...steps[i % steps.length]!, partition: `q-${(i * 97) % topology.partitions.length}` }));
}

function tracked(step: Proposal, i: number, now: number): TrackedMove {
  // A run id is a UUID, as the server makes it.
  const runId = `0190c0de-${String(i).padStart(4, '0')}-7000-8000-${String(now).padStart(12, '0').slice(-12)}`;
  return { partition: step.partition, op: step.op, from: step.from, to: step.to, workflowId: reconfigurationWorkflowId(step.partition), runId, startedAt: now, bytes: step.bytes, reason: step.reason };
}

export async function run(args: string[]): Promise<void> {
  const value = (flag: string, fallback: number): number => (args.includes(flag) ? Number(args[args.indexOf(flag) + 1]) : fallback);
  const nodes = value('--nodes', 1000);
  const partitions = value('--partitions', 100_000);
  const moves = value('--moves', 1000);
  const config = { ...DEFAULT_PLANNER_CONFIG, maxTransfersPerCluster: moves };
  // Cooled reconfigurations: those that completed within the partition cooldown, kept in the worker's book. At `moves` in flight
  // each taking about 10 s (the moves benchmark's overhead plus a 1 MB copy), that is moves / 10 s * 300 s.
  const cooled = value('--cooled', Math.round((moves / 10) * (config.partitionCooldownMs / 1000)));
  const now = Date.UTC(2026, 11, 2);
  const topology = large(nodes, partitions);

  const empty = { topology, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now };
  const converged = planToConvergence(empty, config);
  const steps = stepsInFlight(topology, converged, moves);
  const trackedMoves = steps.map((s, i) => tracked(s, i, now));
  const inFlight: InFlightMove[] = steps.map((s) => ({ partition: s.partition, op: s.op, from: s.from, to: s.to, bytesRemaining: s.bytes }));
  const ids = topology.nodes.map((n) => n.id);
  const cooldowns = {
    nodes: Object.fromEntries(ids.map((id) => [id, now + config.nodeCooldownMs])),
    partitions: {},
    moves: Object.fromEntries(
      Array.from({ length: cooled }, (_, i) => [`q-${(i * 7919) % partitions}`, [{ from: ids[i % ids.length]!, to: ids[(i * 31) % ids.length]!, until: now + config.partitionCooldownMs }]]),
    ),
  };
  const closed: ClosedReconfiguration[] = steps.map((s) => ({ partition: s.partition, from: s.from, to: s.to, closedAt: now }));
  const tick = planNow(empty, config);
  const proposal = firstSteps(converged, config);
  const proposed = proposalOf('plan-1', now, 1, proposal, basisOf(topology, proposal.steps));
  const note = { by: 'operator', reason: 'a reason an operator gives, about this long', at: now };
  const approval: ApprovalState = {
    pending: proposed,
    approved: { planId: 'plan-0', steps: proposed.steps, spreadBefore: proposed.spreadBefore, spreadAfter: proposed.spreadAfter, mean: proposed.mean },
    // Each past plan approved with every step found stale: the most it can record.
    past: Array.from({ length: PAST_PLANS }, (_, i) => ({
      id: `plan-${i + 2}`,
      madeAt: now,
      generation: 1,
      steps: proposed.steps.length,
      state: 'approved' as const,
      approved: approvalRecord(note, 0, proposed.steps.map((step) => ({ step, reason: `${step.partition} changed since the plan was made (generation 1, now 2)` }))),
    })),
  };
  const settings: RebalancerSettings = { planner: config, tickMs: 10_000, ticksPerRun: 500, mode: 'auto' };
  const state: RebalancerState = {
    paused: null,
    lastResumed: null,
    inFlight: trackedMoves,
    // The loop carries the node cooldowns; the partition cooldowns stay in the worker (operations/closed.ts).
    cooldowns: nodeCooldowns(cooldowns),
    cooling: cooled,
    ticks: 0,
    lastPlan: planRecord(now, tick, tick.steps.map((s) => s.partition), [], null),
    lastSignalSeq: 0,
    activeNodes: ids,
    moves: { started: 0, completed: 0, cancelled: 0, aborted: 0 },
  };

  const snapshotResult = {
    inFlight,
    ended: trackedMoves.map((m) => ({ workflowId: m.workflowId, runId: m.runId, status: 'completed', detail: null })),
    recoveryPending: null,
    draining: [],
    active: ids,
    left: null,
    closed,
    cooling: cooled,
  };
  const status = (st: RebalancerState) => ({ ...st, state: 'running', waitingFor: 'the next tick', settings, pinned: {}, excluded: {} });
  // What the server stores: local activities' results (as markers), workflow and child inputs, update results. A
  // local activity's input stays in the worker's process.
  const sizes: [string, 'history' | 'worker', number][] = [
    ['rebalancerSnapshot result (moves in flight, ended and closed)', 'history', payloadBytes(snapshotResult)],
    ['planMoves result (one tick)', 'history', payloadBytes(tick)],
    ['proposePlan result (propose mode)', 'history', payloadBytes({ plan: proposal, generation: 1, basis: proposed.basis })],
    ['a move workflow input', 'history', Math.max(...steps.map((s) => payloadBytes({ partition: s.partition, from: s.from, to: s.to, origin: 'planner', reason: s.reason })))],
    ['continue-as-new, auto mode (settings and state)', 'history', payloadBytes({ settings, state })],
    ['continue-as-new, propose mode (with the approval state)', 'history', payloadBytes({ settings, state: { ...state, approval } })],
    ['an operator update result (pause, pin, ...: the status)', 'history', payloadBytes(status(state))],
    ['rebalancerSnapshot input (the tracked moves)', 'worker', payloadBytes(trackedMoves)],
    ['planMoves input (moves in flight, node cooldowns)', 'worker', payloadBytes({ inFlight, cooldowns: state.cooldowns, now, cooled: true }) + payloadBytes(config)],
  ];
  const parts = {
    perTrackedMove: round(payloadBytes(trackedMoves) / moves, 0),
    perCooledMove: round(payloadBytes(cooldowns.moves) / Math.max(1, cooled), 0),
    perNodeCooldown: round(payloadBytes(cooldowns.nodes) / ids.length, 0),
    // Not a payload: the worker's book of partition cooldowns (operations/closed.ts), in its memory.
    cooledMovesInWorkerKB: kb(payloadBytes(cooldowns.moves)),
    approvalState: kb(payloadBytes(approval)),
  };
  const rows = sizes.map(([what, reaches, bytes]) => ({ what, reaches, kb: kb(bytes), under512KB: bytes <= WARN_BYTES }));
  const largest = rows.filter((r) => r.reaches === 'history').reduce((a, b) => (b.kb > a.kb ? b : a));
  // One tick's markers: the snapshot and the plan (history grows by this per tick until continue-as-new).
  const perTickKB = kb(payloadBytes(snapshotResult) + payloadBytes(tick));
  console.log(
    JSON.stringify({
      scenario: `payloads-${nodes}-nodes-${partitions}-partitions-${moves}-moves`,
      part: 'payloads built in memory with the loop rules, the planner and the default payload converter: no broker or server',
      cooled,
      payloads: rows,
      largest,
      historyPerTickKB: perTickKB,
      bytes: parts,
      targetKB: WARN_BYTES / 1024,
    }),
  );
}
