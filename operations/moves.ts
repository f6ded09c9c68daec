/**
 * Typed helpers to start, list, inspect and cancel reconfigurations: used by the CLI, the admin API, the loop's
 * activities and tests. Every start takes one path (`startReconfiguration`), which checks the request against the
 * broker first, so bad input is refused before anything is written (not even a workflow is started).
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import {
  ApplicationFailure,
  CancelledFailure,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
} from '@temporalio/common';
import { ClusterHttpError, type ClusterClient } from '../cluster/client';
import type { Node, Partition, PartitionView, Topology } from '../cluster/contract';
import {
  cancelUpdate,
  RECONFIGURATION_ID_PREFIX,
  reconfigurationWorkflowId,
  statusQuery,
  WORKFLOW_TYPE,
  type FollowerMoveRequest,
  type MoveOutcome,
  type MovePhase,
  type MoveStatus,
  type ReconfigurationKind,
} from '../rules/definitions';
import { checkFollowerMove, type MoveCheck } from '../rules/follower-move-rules';
import { KindKey, PartitionKey, PhaseKey, PhaseSinceKey, SourceKey, TargetKey } from '../rules/search-attributes';
import type { SearchAttributePair } from '@temporalio/common';

/** A reconfiguration's workflow as its starters see it, request in and outcome out: typed without its code. */
export type Reconfiguration<R> = (request: R) => Promise<MoveOutcome>;

/**
 * The search attributes a reconfiguration starts with (set by the start itself, no history event): what it moves
 * and its first phase, since now, so the Temporal UI finds it from its first moment.
 */
function startSearchAttributes(partition: string, kind: ReconfigurationKind, from: string | null, to: string): SearchAttributePair[] {
  return [
    { key: PartitionKey, value: partition },
    { key: KindKey, value: kind },
    { key: PhaseKey, value: 'validating' },
    { key: PhaseSinceKey, value: new Date() },
    ...(from === null ? [] : [{ key: SourceKey, value: from }]),
    { key: TargetKey, value: to },
  ];
}

/** A request the system refused, with the reason in plain words. */
export class MoveRefused extends Error {
  override name = 'MoveRefused';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface MovesContext {
  client: Client;
  cluster: Pick<ClusterClient, 'partition' | 'nodes'>;
  taskQueue: string;
}

/** The partition as the broker has it; one it does not have is refused by name. */
export async function readView(ctx: MovesContext, partition: string): Promise<PartitionView> {
  try {
    return await ctx.cluster.partition(partition);
  } catch (err) {
    if (err instanceof ClusterHttpError && err.status === 404) {
      throw new MoveRefused('unknown_partition', `partition ${partition} does not exist in the cluster`);
    }
    throw err;
  }
}

/** One start of a reconfiguration of `partition`, before the broker's view is read. */
export interface Start<R, C extends MoveCheck> {
  kind: ReconfigurationKind;
  partition: string;
  /** The replica that leaves or hands over (null when none does) and the node that gains. */
  source: string | null;
  target: string;
  /** The rules the workflow applies, on the broker's view now. */
  check: (view: PartitionView, nodes: Node[]) => C;
  /** What to start once the check passed (it may settle a choice in the request), with its words for the Temporal UI. */
  start: (passed: Extract<C, { ok: true }>) => { request: R; summary: string; details: string };
}

/**
 * The one start path of every reconfiguration an operator asks for: checked against the broker first, refused
 * while a change is in flight, then started as `reconfigure-<partition>` (id conflict policy FAIL, so Temporal
 * itself refuses a second one) with the workflow type of its kind and its search attributes.
 */
export async function startReconfiguration<R, C extends MoveCheck>(ctx: MovesContext, s: Start<R, C>): Promise<WorkflowHandle<Reconfiguration<R>>> {
  const { partition } = s;
  const view = await readView(ctx, partition);
  const { nodes } = await ctx.cluster.nodes();
  const check = s.check(view, nodes);
  if (!check.ok) throw new MoveRefused(check.code, check.message);
  const { request, summary, details } = s.start(check as Extract<C, { ok: true }>);
  const workflowId = reconfigurationWorkflowId(partition);
  const busy = busyRefusal(view.partition);
  if (busy) {
    // A change of our own in flight is named as the running workflow, which says how to wait for or cancel it.
    const running = await ctx.client.workflow.getHandle(workflowId).describe().then((d) => d.status.name === 'RUNNING', () => false);
    if (running) throw await alreadyRunning(ctx.client, partition, workflowId);
    throw busy;
  }
  try {
    return await ctx.client.workflow.start<Reconfiguration<R>>(WORKFLOW_TYPE[s.kind], {
      workflowId,
      taskQueue: ctx.taskQueue,
      args: [request],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      typedSearchAttributes: startSearchAttributes(partition, s.kind, s.source, s.target),
      staticSummary: summary,
      staticDetails: details,
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw await alreadyRunning(ctx.client, partition, workflowId);
    throw err;
  }
}

export function startFollowerMove(ctx: MovesContext, request: FollowerMoveRequest): Promise<WorkflowHandle<Reconfiguration<FollowerMoveRequest>>> {
  const { partition, from, to } = request;
  return startReconfiguration(ctx, {
    kind: 'follower-move',
    partition,
    source: from,
    target: to,
    check: (view, nodes) => checkFollowerMove(view.partition, nodes, from, to),
    start: () => ({
      request,
      summary: `Move follower of ${partition}: ${from} → ${to} (${request.origin})`,
      details:
        `Moves the follower copy of queue partition **${partition}** from **${from}** to **${to}** without a fence: ` +
        `add ${to} as a learner, wait until it is caught up and admitted, swap who counts (boundary B), ` +
        `wait until ${to} is durable at B, then remove ${from} (it keeps its data for the grace period).`,
    }),
  });
}

/**
 * A follower move the cluster as it is now would accept, as a command line (the start banner's example), of a
 * partition not in `leftAlone` where one is; null if none.
 */
export function exampleMove(topology: Topology, leftAlone: ReadonlySet<string> = new Set()): string | null {
  const partitions = topology.partitions.filter((p) => !leftAlone.has(p.id));
  for (const p of partitions.length > 0 ? partitions : topology.partitions) {
    if (busyRefusal(p)) continue;
    for (const from of p.followers) {
      const to = topology.nodes.find((n) => checkFollowerMove(p, topology.nodes, from, n.id).ok);
      if (to) return `rebalancer move ${p.id} --from ${from} --to ${to.id} --wait`;
    }
  }
  return null;
}

/**
 * Why a move cannot start on the partition as it is now, or null: a change already in flight (a learner or a
 * leaving replica), admission closed for a handoff, or a pending recovery. Refused up front rather than
 * started and aborted at the workflow's first step.
 */
function busyRefusal(p: Partition): MoveRefused | null {
  if (p.learners.length > 0) {
    return new MoveRefused('change_in_flight', `${p.id} has a change in flight: learner ${p.learners.join(', ')} is catching up; wait until it is promoted or dropped`);
  }
  if (p.leaving) {
    return new MoveRefused('change_in_flight', `${p.id} has a change in flight: ${p.leaving} is leaving and not yet removed; wait until it is removed`);
  }
  if (p.admission === 'closed') {
    return new MoveRefused('admission_closed', `${p.id} has admission closed for a handoff of its owner ${p.owner}; wait until the handoff ends`);
  }
  if (p.pendingRecovery) {
    return new MoveRefused('pending_recovery', `${p.id} has a pending recovery (${p.pendingRecovery.failedOwner} failed in epoch ${p.pendingRecovery.epoch}); wait until it is activated`);
  }
  return null;
}

async function alreadyRunning(client: Client, partition: string, workflowId: string): Promise<MoveRefused> {
  const running = await describeRunning(client, workflowId);
  return new MoveRefused(
    'reconfiguration_running',
    `a reconfiguration of ${partition} is already running: workflow ${workflowId}${running ? ` (${running})` : ''}; ` +
      `wait for it or cancel it with \`rebalancer cancel ${partition}\``,
  );
}

async function describeRunning(client: Client, workflowId: string): Promise<string | null> {
  try {
    const s = await client.workflow.getHandle(workflowId).query(statusQuery);
    return `${s.kind} ${s.from} -> ${s.to}, phase ${s.phase}`;
  } catch {
    return null;
  }
}

/**
 * A reconfiguration in progress as visibility lists it: what it moves and its phase, from the search attributes it
 * starts with and upserts, so listing thousands asks no workflow anything.
 */
export type MoveInProgress = Pick<MoveStatus, 'kind' | 'partition' | 'from' | 'to' | 'phase'> & { workflowId: string };

const byPartition = (a: { partition: string }, b: { partition: string }) => a.partition.localeCompare(b.partition, 'en', { numeric: true });

const inProgressOn = (taskQueue: string): string =>
  `ExecutionStatus = "Running" AND WorkflowId STARTS_WITH "${RECONFIGURATION_ID_PREFIX}" AND TaskQueue = ${JSON.stringify(taskQueue)}`;

/**
 * The runs visibility lists in progress on the task queue, each by its run id and the first run id of its chain
 * where visibility gives it. Visibility lags: a run that closed a moment ago may still be listed, one just started not yet.
 */
export async function runsInProgress(client: Pick<Client, 'workflow'>, taskQueue: string): Promise<Set<string>> {
  const runs = new Set<string>();
  for await (const wf of client.workflow.list({ query: inProgressOn(taskQueue) })) {
    runs.add(wf.runId);
    const first = wf.raw.firstRunId;
    if (first) runs.add(first);
  }
  return runs;
}

/**
 * Every reconfiguration in progress on the task queue (this deployment's workers), by partition (q-2 before q-10),
 * from one visibility list: at 200 in progress, a query to each took a second, which every page of the dashboard
 * waited for. A run without its search attributes (none starts so) is queried. Other task queues of the namespace are
 * left out: their workers may be gone, and a query to a workflow no worker polls waits until it times out.
 */
export async function listMovesInProgress(client: Client, taskQueue: string): Promise<MoveInProgress[]> {
  const listed: MoveInProgress[] = [];
  const unnamed: string[] = [];
  for await (const wf of client.workflow.list({ query: inProgressOn(taskQueue) })) {
    const attrs = wf.typedSearchAttributes;
    const [kind, to, phase] = [attrs.get(KindKey), attrs.get(TargetKey), attrs.get(PhaseKey)];
    if (kind === undefined || to === undefined || phase === undefined) unnamed.push(wf.workflowId);
    else {
      const partition = attrs.get(PartitionKey) ?? wf.workflowId.slice(RECONFIGURATION_ID_PREFIX.length);
      listed.push({ workflowId: wf.workflowId, kind: kind as ReconfigurationKind, partition, from: attrs.get(SourceKey) ?? null, to, phase: phase as MovePhase });
    }
  }
  const queried = await moveStatuses(client, unnamed.map((workflowId) => ({ workflowId })));
  return [...listed, ...queried.map((m) => ({ workflowId: reconfigurationWorkflowId(m.partition), kind: m.kind, partition: m.partition, from: m.from, to: m.to, phase: m.phase }))].sort(byPartition);
}

/** The status of each of these reconfigurations, queried at once, in their order; one that ended meanwhile is left out. */
export async function moveStatuses(client: Client, moves: readonly { workflowId: string }[]): Promise<MoveStatus[]> {
  return (await moveStatusesWithin(client, moves, null)).answered;
}

/**
 * `moveStatuses`, waiting at most `withinMs` (null: as long as the queries take): the statuses that came in time, in
 * order, and the moves whose query had not answered by then. A workflow answers a query only between its workflow
 * tasks: with a thousand moves in flight on two cores a page of 50 waited 4-31 s for the slowest. `onAnswer` hears
 * every answer, a late one too, when it comes.
 */
export async function moveStatusesWithin<M extends { workflowId: string }>(
  client: Pick<Client, 'workflow'>,
  moves: readonly M[],
  withinMs: number | null,
  onAnswer?: (move: M, status: MoveStatus) => void,
): Promise<{ answered: MoveStatus[]; late: M[] }> {
  const LATE = 'late' as const;
  let timer: NodeJS.Timeout | undefined;
  const bound = withinMs === null ? null : new Promise<typeof LATE>((r) => (timer = setTimeout(() => r(LATE), withinMs)));
  const asked = moves.map((m) =>
    client.workflow
      .getHandle(m.workflowId)
      .query(statusQuery)
      .then((status) => {
        onAnswer?.(m, status);
        return status;
      })
      .catch(() => null),
  );
  const results = await Promise.all(asked.map((q) => (bound === null ? q : Promise.race([q, bound]))));
  clearTimeout(timer);
  const answered: MoveStatus[] = [];
  const late: M[] = [];
  results.forEach((r, i) => {
    if (r === LATE) late.push(moves[i]!);
    else if (r !== null) answered.push(r);
  });
  return { answered, late };
}

/**
 * Each listed move's last status answer, for a view that waits only so long for its queries (the admin's pages,
 * `moves --watch`): a move whose query is late shows its last answer instead of vanishing or reading as ended.
 * `heard` takes every answer (give it to `moveStatusesWithin`), a late one too.
 */
export class LastAnswers {
  private readonly last = new Map<string, { status: MoveStatus; at: number }>();

  readonly heard = (move: { workflowId: string }, status: MoveStatus): void => {
    this.last.set(move.workflowId, { status, at: Date.now() });
  };

  /**
   * Forgets the moves no longer listed; then splits the late ones into those with a last answer (of this move: the
   * kind, source and target it is listed with, not an earlier move's of the partition) and those never heard from.
   */
  late<M extends MoveInProgress>(listed: readonly MoveInProgress[], late: readonly M[]): { known: { status: MoveStatus; at: number }[]; unknown: M[] } {
    const ids = new Set(listed.map((m) => m.workflowId));
    for (const id of this.last.keys()) if (!ids.has(id)) this.last.delete(id);
    const known: { status: MoveStatus; at: number }[] = [];
    const unknown: M[] = [];
    for (const m of late) {
      const last = this.last.get(m.workflowId);
      if (last && last.status.kind === m.kind && last.status.from === m.from && last.status.to === m.to) known.push(last);
      else unknown.push(m);
    }
    return { known, unknown };
  }
}

/** Status of every reconfiguration in progress on the task queue, by partition: a query to each (`listMovesInProgress`). */
export async function listMoves(client: Client, taskQueue: string): Promise<MoveStatus[]> {
  return moveStatuses(client, await listMovesInProgress(client, taskQueue));
}

export interface MoveDetail {
  workflowId: string;
  runId: string;
  running: boolean;
  status: MoveStatus | null;
  outcome: MoveOutcome | null;
}

/**
 * The latest reconfiguration of a partition, running or ended. With no move on record, the broker (when given)
 * tells a partition that never moved (`no_move`) from one that does not exist (`unknown_partition`).
 */
export async function showMove(client: Client, partition: string, cluster?: Pick<ClusterClient, 'topology' | 'baseUrl'>): Promise<MoveDetail> {
  const workflowId = reconfigurationWorkflowId(partition);
  const handle = client.workflow.getHandle(workflowId);
  let description;
  try {
    description = await handle.describe();
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    const known = cluster ? (await cluster.topology()).partitions.map((p) => p.id) : null;
    if (known && !known.includes(partition)) {
      const shown = known.slice(0, 10).join(', ') + (known.length > 10 ? ', ...' : '');
      throw new MoveRefused(
        'unknown_partition',
        `partition ${partition} is unknown to the broker at ${cluster!.baseUrl}: it has ${known.length} (${shown}); GET ${cluster!.baseUrl}/v1/topology lists them all`,
      );
    }
    throw new MoveRefused('no_move', `no move has run on ${partition} (no workflow ${workflowId})`);
  }
  const running = description.status.name === 'RUNNING';
  const status = await handle.query(statusQuery).catch(() => null);
  const outcome = running ? null : await outcomeOf(handle).catch(() => null);
  return { workflowId, runId: description.runId, running, status, outcome: outcome ?? status?.outcome ?? null };
}

export interface EndedMove {
  workflowId: string;
  /** From the `RebalanceKind` search attribute. */
  kind: ReconfigurationKind | null;
  partition: string;
  from: string | null;
  to: string | null;
  closedAt: string | null;
  /** How Temporal recorded the end: COMPLETED, FAILED, TERMINATED, ... */
  executionStatus: string;
  /** The workflow's own outcome; null when it ended without one (terminated, timed out). */
  outcome: MoveOutcome | null;
}

/** The `limit` most recently ended moves, newest first, from Temporal visibility. */
export async function recentMoves(client: Client, limit: number): Promise<EndedMove[]> {
  const ended = [];
  // Visibility lists ended workflows most recently closed first; the sort only makes that explicit. One page of
  // `limit`: the default page holds up to 1,000 runs, read whole for the first `limit` of them.
  const query = `ExecutionStatus != "Running" AND WorkflowId STARTS_WITH "${RECONFIGURATION_ID_PREFIX}"`;
  for await (const wf of client.workflow.list({ query, pageSize: Math.max(1, limit) })) {
    if (ended.length >= limit) break;
    ended.push(wf);
  }
  ended.sort((a, b) => (b.closeTime?.getTime() ?? 0) - (a.closeTime?.getTime() ?? 0));
  return Promise.all(
    ended.map(async (wf) => {
      const attrs = wf.typedSearchAttributes;
      const outcome = memoOutcome(wf.memo) ?? (await outcomeOf(client.workflow.getHandle(wf.workflowId, wf.runId)).catch(() => null));
      return {
        workflowId: wf.workflowId,
        kind: (attrs.get(KindKey) as ReconfigurationKind | undefined) ?? outcome?.kind ?? null,
        partition: attrs.get(PartitionKey) ?? wf.workflowId.slice(RECONFIGURATION_ID_PREFIX.length),
        from: attrs.get(SourceKey) ?? null,
        to: attrs.get(TargetKey) ?? null,
        closedAt: wf.closeTime?.toISOString() ?? null,
        executionStatus: wf.status.name,
        outcome,
      };
    }),
  );
}

/** The outcome an ended run keeps in its memo (every run since the `outcome-memo` patch, a cancelled one before it), or null. */
export function memoOutcome(memo: Record<string, unknown> | undefined): MoveOutcome | null {
  return (memo?.['outcome'] as MoveOutcome | undefined) ?? null;
}

/**
 * How a reconfiguration ended, whatever its workflow type: every type returns it when completed, carry it as details[0] of the
 * CancelledFailure when cancelled and of the ApplicationFailure (typed by the code) when aborted. Null when the
 * workflow ended without one (terminated, timed out). Waits for a running workflow to end.
 */
export async function outcomeOf(handle: WorkflowHandle): Promise<MoveOutcome | null> {
  try {
    return (await handle.result()) as MoveOutcome;
  } catch (err) {
    // Loaded already (the handle came from it); imported here so the CLI loads it only to talk to Temporal (output.ts, connect).
    const { WorkflowFailedError } = await import('@temporalio/client');
    if (!(err instanceof WorkflowFailedError)) throw err;
    const { cause } = err;
    if ((cause instanceof CancelledFailure || cause instanceof ApplicationFailure) && cause.details?.[0]) return cause.details[0] as MoveOutcome;
    // A Canceled close keeps no details: the workflow leaves its outcome in the memo.
    if (cause instanceof CancelledFailure) return memoOutcome((await handle.describe()).memo);
    return null;
  }
}

/** The phases a move entered, in order, from its history (each phase change is a search-attribute upsert). */
export async function phasesSoFar(handle: WorkflowHandle): Promise<string[]> {
  const history = await handle.fetchHistory();
  const phases: string[] = [];
  for (const event of history.events ?? []) {
    const data = event.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields?.[PhaseKey.name]?.data;
    if (data) phases.push(JSON.parse(Buffer.from(data).toString('utf8')) as string);
  }
  return phases;
}

/** Operator cancel: accepted before the swap; refused after it, with the reason and the way forward. */
export async function cancelMove(client: Client, partition: string, reason: string): Promise<MoveStatus> {
  const handle = client.workflow.getHandle(reconfigurationWorkflowId(partition));
  try {
    await handle.describe();
  } catch {
    throw new MoveRefused('no_move', `no move is running on partition ${partition}`);
  }
  try {
    await handle.executeUpdate(cancelUpdate, { args: [{ reason }] });
  } catch (err) {
    // Loaded already, as in outcomeOf.
    const { WorkflowUpdateFailedError } = await import('@temporalio/client');
    if (err instanceof WorkflowUpdateFailedError) {
      throw new MoveRefused('cancel_refused', err.cause?.message ?? err.message);
    }
    throw new MoveRefused('no_move', `no move is running on partition ${partition}: ${(err as Error).message}`);
  }
  // The update decided (it refuses past the point of no return); Temporal's own cancel then lets the run close as
  // Canceled rather than Failed. A run that ended meanwhile has nothing left to cancel.
  await handle.cancel().catch(() => undefined);
  return handle.query(statusQuery);
}
