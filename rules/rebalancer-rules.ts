/**
 * The rebalancer's and the drain's rules as pure functions: which planned steps start now (limits, one
 * reconfiguration per partition, nodes left alone), cooldowns after a move ends, what counts as in flight,
 * and the operator notes of pause and resume. Deterministic: used inside workflows and by activities.
 */
import type { Partition, Topology, Transfer } from '../cluster/contract';
import type { CooledMove, InFlightMove, Plan, PlanInput, PlannerConfig, Proposal } from '../planner/types';
import type { Cooldowns, EndedMove, OperatorNote, PauseRequest, PlanRecord, RebalancerState, TrackedMove } from './definitions';

/** Why an operator's request to the loop is refused for want of who asks and why, or null. */
export function checkWhoAndWhy(action: string, request: PauseRequest | undefined): string | null {
  if (typeof request?.by !== 'string' || request.by.trim() === '') {
    return `${action} needs who asks: "by" is empty; expected a name, for example "alice"`;
  }
  if (typeof request.reason !== 'string' || request.reason.trim() === '') {
    return `${action} needs a reason: "reason" is empty; expected words saying why, for example "disk upgrade on n3"`;
  }
  return null;
}

/** Why a pause or resume is refused, or null: who and why are required, and the loop must be in the other state. */
export function checkOperatorNote(action: 'pause' | 'resume', request: PauseRequest | undefined, paused: OperatorNote | null): string | null {
  const missing = checkWhoAndWhy(action, request);
  if (missing) return missing;
  if (action === 'pause' && paused) return `the rebalancer is already paused by ${paused.by} (${paused.reason}); resume it first`;
  if (action === 'resume' && !paused) return 'the rebalancer is not paused: nothing to resume';
  return null;
}

export type HoldAction = 'pin' | 'unpin' | 'exclude' | 'include';

/** What each action holds or releases: a pin holds a partition, an exclusion a node. */
const HOLDS: Record<HoldAction, { what: 'partition' | 'node'; held: string; undo: HoldAction; adds: boolean }> = {
  pin: { what: 'partition', held: 'pinned', undo: 'unpin', adds: true },
  unpin: { what: 'partition', held: 'pinned', undo: 'pin', adds: false },
  exclude: { what: 'node', held: 'excluded', undo: 'include', adds: true },
  include: { what: 'node', held: 'excluded', undo: 'exclude', adds: false },
};

/**
 * Why a pin, unpin, exclude or include is refused, or null: who and why are required, an id, and the partition
 * or node must be in the other state. `holds`: the loop's pins (for pin and unpin) or exclusions.
 */
export function checkHold(action: HoldAction, id: unknown, request: PauseRequest | undefined, holds: Record<string, OperatorNote>): string | null {
  const { what, held, undo, adds } = HOLDS[action];
  const missing = checkWhoAndWhy(action, request);
  if (missing) return missing;
  if (typeof id !== 'string' || id.trim() === '') return `${action} needs a ${what}: "${what}" is empty; expected an id, for example "${what === 'node' ? 'n3' : 'q-3'}"`;
  const note = holds[id.trim()];
  if (adds && note) return `${id} is already ${held} by ${note.by} (${note.reason}); ${undo} it first`;
  const now = Object.keys(holds);
  if (!adds && !note) return `${id} is not ${held}: nothing to ${action} (${held}: ${now.length > 0 ? now.join(', ') : 'none'})`;
  return null;
}

/** Why the loop leaves a planned step alone because of an operator's pin or exclusion, or null. */
export function operatorHold(step: Pick<Proposal, 'partition' | 'from' | 'to'>, pinned: Record<string, OperatorNote> = {}, excluded: Record<string, OperatorNote> = {}): string | null {
  const pin = pinned[step.partition];
  if (pin) return `${step.partition} is pinned by ${pin.by}: ${pin.reason}`;
  const node = [step.from, step.to].find((n) => excluded[n]);
  return node ? `${node} is excluded by ${excluded[node]!.by}: ${excluded[node]!.reason}` : null;
}

/**
 * The loop's pins and exclusions as the planner reads them, for the loop and for a dry run of what it would do;
 * empty ones are left out, so a plan request without any is the same as before pins existed.
 */
export function planHolds(holds: Pick<RebalancerState, 'pinned' | 'excluded'>): Pick<PlanInput, 'pinned' | 'excluded'> {
  const some = (r: Record<string, OperatorNote> | undefined) => r !== undefined && Object.keys(r).length > 0;
  return { ...(some(holds.pinned) ? { pinned: holds.pinned } : {}), ...(some(holds.excluded) ? { excluded: holds.excluded } : {}) };
}

/**
 * Cooldowns still running at `now`, so the state carried across continue-as-new stays small. A state from an older
 * run has no `moves`, and its partition entries hold the whole partition until they end.
 */
export function pruneCooldowns(cooldowns: Cooldowns, now: number): Cooldowns {
  const keep = (r: Record<string, number>) => Object.fromEntries(Object.entries(r).filter(([, until]) => until > now));
  const moves: Record<string, CooledMove[]> = {};
  for (const [partition, list] of Object.entries(cooldowns.moves ?? {})) {
    const running = list.filter((m) => m.until > now);
    if (running.length > 0) moves[partition] = running;
  }
  return { nodes: keep(cooldowns.nodes), partitions: keep(cooldowns.partitions), moves };
}

/**
 * The cooldowns the loop carries: its nodes' and the whole partitions', bounded by the cluster's nodes and what drains
 * hold. Those of completed moves (`moves`) stay in the worker's book, kept from visibility (operations/closed.ts).
 */
export function nodeCooldowns(cooldowns: Cooldowns): Cooldowns {
  return { nodes: cooldowns.nodes, partitions: cooldowns.partitions };
}

/** The nodes the mean is over: live and not draining. */
export function activeNodes(topology: Topology): string[] {
  return topology.nodes.filter((n) => n.live && !n.draining).map((n) => n.id);
}

/** Whether a node joined those the mean is over (joined, came back up, undrained) between two looks; no when either is unknown. */
export function nodeArrived(before: readonly string[] | undefined, now: readonly string[] | undefined): boolean {
  return before !== undefined && now !== undefined && now.some((n) => !before.includes(n));
}

/**
 * The loop's cooldowns at a look that finds `active` nodes where its last look found `before`. Once a node arrived
 * the node cooldowns go: each was a judgement against the old mean, that a node which just received copies is not
 * overloaded yet; with a new node to fill, those copies may go on to it at once (the partition cooldowns stay, so no
 * copy goes back and forth).
 */
export function cooldownsOnArrival(cooldowns: Cooldowns, before: readonly string[] | undefined, active: readonly string[] | undefined): Cooldowns {
  return nodeArrived(before, active) ? { ...cooldowns, nodes: {} } : cooldowns;
}

/** A reconfiguration that completed, whoever started it (an operator, a drain, the loop), as visibility lists it. */
export interface ClosedReconfiguration {
  partition: string;
  /** The node the copy or the owner role left (null for an increase) and the one it arrived on. */
  from: string | null;
  to: string;
  closedAt: number;
}

/**
 * Sets a completed reconfiguration's cooldowns: its receiving node's (unless `coolNode` is false), and its
 * partition's from and to (longest wins).
 */
export function cool(
  nodes: Record<string, number>,
  moves: Record<string, CooledMove[]>,
  m: { partition: string; from: string | null; to: string },
  at: number,
  config: Pick<PlannerConfig, 'nodeCooldownMs' | 'partitionCooldownMs'>,
  coolNode = true,
): void {
  if (coolNode) nodes[m.to] = Math.max(nodes[m.to] ?? 0, at + config.nodeCooldownMs);
  const until = at + config.partitionCooldownMs;
  const list = (moves[m.partition] ??= []);
  const same = list.findIndex((c) => c.from === m.from && c.to === m.to);
  if (same < 0) list.push({ from: m.from, to: m.to, until });
  else list[same] = { ...list[same]!, until: Math.max(list[same]!.until, until) };
}

/** Slack for visibility, which lists a closed workflow a little after it closed: such a one is listed on a later look. */
export const VISIBILITY_LAG_MS = 15_000;

/**
 * From when the loop lists closed reconfigurations at `now`: since its last look (minus the slack), never further
 * back than a partition cooldown, which is also where a loop without an earlier look starts.
 */
export function closedListFrom(lookedAt: number | undefined, now: number, config: Pick<PlannerConfig, 'partitionCooldownMs'>): number {
  return Math.max(lookedAt ?? 0, now - config.partitionCooldownMs) - VISIBILITY_LAG_MS;
}

const copyMoves = (cooldowns: Cooldowns): Record<string, CooledMove[]> =>
  Object.fromEntries(Object.entries(cooldowns.moves ?? {}).map(([p, list]) => [p, [...list]]));

/**
 * The cooldowns of reconfigurations that completed since the loop last looked, whoever started them, as those
 * of its own moves: an operator's handoff or move is intent, and the loop must not undo it within them. Those
 * that closed at or before `nodesFrom` (when a node last arrived: see `cooldownsOnArrival`) cool no node, since
 * visibility lists a reconfiguration again on the looks within its lag.
 */
export function recordClosed(
  cooldowns: Cooldowns,
  closed: readonly ClosedReconfiguration[],
  config: Pick<PlannerConfig, 'nodeCooldownMs' | 'partitionCooldownMs'>,
  nodesFrom = 0,
): Cooldowns {
  if (closed.length === 0) return cooldowns;
  const nodes = { ...cooldowns.nodes };
  const moves = copyMoves(cooldowns);
  for (const c of closed) cool(nodes, moves, c, c.closedAt, config, c.closedAt > nodesFrom);
  return { ...cooldowns, nodes, moves };
}

export interface MoveCounts {
  started: number;
  completed: number;
  cancelled: number;
  aborted: number;
}

/**
 * Drop the moves that ended from those in flight. A completed move cools down the node that received the copy (or
 * the owner role), so that node is not judged overloaded and drained again at once, and its partition between the
 * two nodes (see `CooledMove`: the copy stays, ownership may still follow it); a
 * cancelled or aborted move cools nothing, so a move a recovery aborted is planned again from fresh scores on
 * the next tick after activation, as the note says.
 */
export function recordEnded(
  inFlight: TrackedMove[],
  ended: EndedMove[],
  cooldowns: Cooldowns,
  counts: MoveCounts,
  now: number,
  config: Pick<PlannerConfig, 'nodeCooldownMs' | 'partitionCooldownMs'>,
): { inFlight: TrackedMove[]; cooldowns: Cooldowns; counts: MoveCounts } {
  const byRun = new Map(ended.map((e) => [e.runId, e]));
  const nodes = { ...cooldowns.nodes };
  const moves = copyMoves(cooldowns);
  const next = { ...counts };
  const still: TrackedMove[] = [];
  for (const m of inFlight) {
    const end = byRun.get(m.runId);
    if (!end) {
      still.push(m);
      continue;
    }
    next[end.status]++;
    if (end.status !== 'completed') continue;
    cool(nodes, moves, m, now, config);
  }
  return { inFlight: still, cooldowns: { ...cooldowns, nodes, moves }, counts: next };
}

/** The nodes holding any copy of the partition: owner, followers, learners and the leaving replica. */
export function holders(p: Partition): string[] {
  return [p.owner, ...p.followers, ...p.learners, ...(p.leaving ? [p.leaving] : [])];
}

/**
 * Every reconfiguration in flight, as the planner counts it: the moves this workflow tracks (it knows their
 * source) and every change the topology shows in flight (learners, a leaving replica, admission closed for a
 * handoff), whoever started it. Bytes remaining come from the sync budget's transfers. `records`: the topology's
 * partitions, or of them those not at rest and the tracked moves', in the same order (cluster/derived.ts: 100,000 at
 * size).
 */
export function inFlightMoves(records: readonly Partition[], tracked: TrackedMove[], transfers: Transfer[]): InFlightMove[] {
  const remaining = new Map<string, number>();
  for (const t of transfers) remaining.set(`${t.partition} ${t.node}`, (remaining.get(`${t.partition} ${t.node}`) ?? 0) + t.bytesRemaining);
  const bytesTo = (partition: string, node: string) => remaining.get(`${partition} ${node}`) ?? 0;
  // One pass over `records`: the records of tracked moves, and the others changing.
  const trackedIds = new Set(tracked.map((m) => m.partition));
  const found = new Map<string, Partition>();
  const others: InFlightMove[] = [];
  for (const p of records) {
    if (trackedIds.has(p.id)) {
      found.set(p.id, p);
      continue;
    }
    const learner = p.learners[0];
    if (learner) others.push({ partition: p.id, op: 'follower_move', from: p.leaving, to: learner, bytesRemaining: bytesTo(p.id, learner) });
    else if (p.leaving) others.push({ partition: p.id, op: 'follower_move', from: p.leaving, to: p.boundary?.joined ?? p.leaving, bytesRemaining: 0 });
    else if (p.admission === 'closed') others.push({ partition: p.id, op: 'owner_handoff', from: p.owner, to: p.owner, bytesRemaining: 0 });
  }
  const out = new Map<string, InFlightMove>();
  for (const m of tracked) {
    const p = found.get(m.partition);
    const learning = p?.learners.includes(m.to) ?? false;
    out.set(m.partition, { partition: m.partition, op: m.op, from: m.from, to: m.to, bytesRemaining: learning ? bytesTo(m.partition, m.to) : m.op !== 'owner_handoff' && !p?.followers.includes(m.to) ? m.bytes : 0 });
  }
  for (const m of others) out.set(m.partition, m);
  return [...out.values()];
}

/**
 * Pending recoveries in words, or null when none is pending: the loop plans nothing while one is. `records`: the
 * topology's, or any of them that hold those not at rest, in the same order.
 */
export function recoveryPending(records: readonly Partition[]): string | null {
  const pending = records.filter((p) => p.pendingRecovery);
  if (pending.length === 0) return null;
  const named = pending.slice(0, 3).map((p) => `${p.id} (${p.pendingRecovery!.failedOwner} failed in epoch ${p.pendingRecovery!.epoch})`);
  return `recovery pending on ${named.join(', ')}${pending.length > 3 ? ` and ${pending.length - 3} more` : ''}`;
}

export interface Selection {
  start: Proposal[];
  skipped: { partition: string; reason: string }[];
}

/**
 * The planned steps to start now: one reconfiguration per partition, the transfer limits counted over the moves
 * in flight (per node on the receiving node, as the broker's sync budget counts a transfer; a handoff copies
 * nothing), and no step touching a node in `leaveAlone` (draining nodes, for the loop). `keep` narrows the steps
 * further (a drain keeps those off its node).
 */
export function selectStarts(
  steps: Proposal[],
  inFlight: InFlightMove[],
  config: Pick<PlannerConfig, 'maxTransfersPerNode' | 'maxTransfersPerCluster'>,
  leaveAlone: ReadonlySet<string>,
  keep: (step: Proposal) => boolean = () => true,
): Selection {
  const inbound = new Map<string, number>();
  const busy = new Set<string>();
  // A repair copies to its target as a follower move does; a handoff copies nothing.
  const count = (m: { op: Proposal['op']; to: string }) => m.op !== 'owner_handoff' && inbound.set(m.to, (inbound.get(m.to) ?? 0) + 1);
  for (const m of inFlight) {
    busy.add(m.partition);
    count(m);
  }
  let cluster = inFlight.length;
  const start: Proposal[] = [];
  const skipped: Selection['skipped'] = [];
  for (const step of steps) {
    if (!keep(step)) continue;
    const touched = [step.from, step.to].filter((n) => leaveAlone.has(n));
    let reason: string | null = null;
    if (busy.has(step.partition)) reason = `a reconfiguration of ${step.partition} is already in flight`;
    else if (touched.length > 0) reason = `${touched.join(' and ')} is draining: the rebalancer leaves it alone`;
    else if (cluster >= config.maxTransfersPerCluster) reason = `the cluster limit of ${config.maxTransfersPerCluster} moves in flight is reached`;
    else if (step.op !== 'owner_handoff' && (inbound.get(step.to) ?? 0) >= config.maxTransfersPerNode) {
      reason = `${step.to} already receives ${config.maxTransfersPerNode} copies (the per-node transfer limit)`;
    }
    if (reason) {
      skipped.push({ partition: step.partition, reason });
      continue;
    }
    start.push(step);
    busy.add(step.partition);
    count(step);
    cluster++;
  }
  return { start, skipped };
}

/**
 * The steps a plan record keeps: it is part of the status the loop and drains answer and of the state the loop
 * carries across continue-as-new, so at most this many, with the count of all.
 */
export const PLAN_RECORD_STEPS = 100;

/** What the loop or a drain records of a tick's plan: what started, what was skipped and why, the first steps. */
export function planRecord(
  at: number,
  plan: Pick<Plan, 'steps' | 'spreadBefore' | 'spreadAfter' | 'mean' | 'threshold' | 'planningMs'>,
  started: string[],
  skipped: PlanRecord['skipped'],
  idleReason: string | null,
): PlanRecord {
  const { steps, spreadBefore, spreadAfter, mean, threshold, planningMs } = plan;
  const kept = steps.length > PLAN_RECORD_STEPS ? { steps: steps.slice(0, PLAN_RECORD_STEPS), stepCount: steps.length } : { steps };
  return { at, ...kept, started, skipped, idleReason, spreadBefore, spreadAfter, mean, threshold, planningMs };
}
