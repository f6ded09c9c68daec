/**
 * Typed helpers for the rebalancer loop and drains, used by the worker, the CLI, the admin API and tests: start the
 * loop (or join the running one), pause, resume and read its status; start, watch and cancel a drain. A drain is
 * checked against the broker first, so a bad one is refused before anything is written.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { ClusterClient } from '../cluster/client';
import { ApplicationFailure, WorkflowExecutionAlreadyStartedError, WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowNotFoundError } from '@temporalio/common';
import type { Topology } from '../cluster/contract';
import {
  approvePlanUpdate,
  drainStatusQuery,
  drainWorkflowId,
  excludeUpdate,
  includeUpdate,
  pauseUpdate,
  pinUpdate,
  unpinUpdate,
  rebalancerStatusQuery,
  refreshPlanUpdate,
  rebalancerWorkflowId,
  resumeUpdate,
  type ApprovalResult,
  type ApproveRequest,
  type DrainOutcome,
  type DrainRequest,
  type DrainStatus,
  type PauseRequest,
  type RebalancerInput,
  type RebalancerSettings,
  type RebalancerStatus,
  type RefreshResult,
} from '../rules/definitions';
import { checkDrain } from '../rules/rebalancer-drain-rules';
import { holders, type HoldAction } from '../rules/rebalancer-rules';
import { MoveRefused, outcomeOf } from './moves';
import { DEFAULT_PLANNER_CONFIG, underReplicated, type UnderReplicated } from '../planner';

/** Starts the loop unless it runs already; the running one keeps its state and settings. */
export async function ensureRebalancer(client: Client, taskQueue: string, scope: string, settings: RebalancerSettings): Promise<string> {
  const workflowId = rebalancerWorkflowId(scope);
  await client.workflow.start<(input: RebalancerInput) => Promise<never>>('rebalancer', {
    workflowId,
    taskQueue,
    args: [{ settings }],
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    staticSummary: 'Rebalancer loop: plans follower moves and owner handoffs and starts them within the transfer limits',
  });
  return workflowId;
}

function loopHandle(client: Client, scope: string): WorkflowHandle {
  return client.workflow.getHandle(rebalancerWorkflowId(scope));
}

export async function rebalancerStatus(client: Client, scope: string): Promise<RebalancerStatus> {
  try {
    return await loopHandle(client, scope).query(rebalancerStatusQuery);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw noLoop(scope);
    throw err;
  }
}

function noLoop(scope: string): MoveRefused {
  return new MoveRefused('no_rebalancer', `no rebalancer runs for this broker and task queue (workflow ${rebalancerWorkflowId(scope)}): \`npm start\` starts it`);
}

/** Pause or resume; the loop refuses a request without who and why, a pause when paused, a resume when running. */
export async function setPaused(client: Client, scope: string, paused: boolean, request: PauseRequest): Promise<RebalancerStatus> {
  const code = paused ? 'pause_refused' : 'resume_refused';
  return loopUpdate(scope, () => loopHandle(client, scope).executeUpdate(paused ? pauseUpdate : resumeUpdate, { args: [request] }), () => code);
}

/**
 * Propose mode: approve the pending plan (its stale steps refused with why, the rest queued to start) or ask for a
 * fresh one. A refusal's code is the loop's: unknown_plan, plan_used (with the plan's state), auto_mode, paused.
 */
export async function approvePlan(client: Client, scope: string, request: ApproveRequest): Promise<ApprovalResult> {
  return loopUpdate(scope, () => loopHandle(client, scope).executeUpdate(approvePlanUpdate, { args: [request] }), loopCode);
}

export async function refreshPlan(client: Client, scope: string, request: PauseRequest): Promise<RefreshResult> {
  return loopUpdate(scope, () => loopHandle(client, scope).executeUpdate(refreshPlanUpdate, { args: [request] }), loopCode);
}

/** The refusal code the approval updates' validators give as their failure's type (rebalancer-approval.ts). */
const loopCode = (cause: unknown) => (cause instanceof ApplicationFailure && cause.type ? cause.type : 'refused');

/** An update to the loop; a refusal becomes MoveRefused with the code `codeOf` reads from the failure. */
async function loopUpdate<T>(scope: string, send: () => Promise<T>, codeOf: (cause: unknown) => string): Promise<T> {
  try {
    return await send();
  } catch (err) {
    // Loaded already (the update went through it); imported here so the CLI loads it only to talk to Temporal (output.ts, connect).
    const { WorkflowUpdateFailedError } = await import('@temporalio/client');
    if (err instanceof WorkflowUpdateFailedError) throw new MoveRefused(codeOf(err.cause), err.cause?.message ?? err.message);
    if (err instanceof WorkflowNotFoundError) throw noLoop(scope);
    throw err;
  }
}

/**
 * Pin or unpin a partition, exclude or include a node. The loop refuses a request without who and why, a pin of a
 * partition pinned already, an unpin of one that is not (likewise for nodes); check the id against the broker first
 * (`unknownId`), as the loop cannot.
 */
export async function setHold(client: Client, scope: string, action: HoldAction, id: string, request: PauseRequest): Promise<RebalancerStatus> {
  const handle = loopHandle(client, scope);
  return loopUpdate(
    scope,
    () =>
      action === 'pin' || action === 'unpin'
        ? handle.executeUpdate(action === 'pin' ? pinUpdate : unpinUpdate, { args: [{ ...request, partition: id }] })
        : handle.executeUpdate(action === 'exclude' ? excludeUpdate : includeUpdate, { args: [{ ...request, node: id }] }),
    () => `${action}_refused`,
  );
}

function listed(ids: string[]): string {
  return ids.slice(0, 10).join(', ') + (ids.length > 10 ? ', ...' : '');
}

/** An id the broker does not have, in words naming it (and the field it came in) and what the broker has; null when it has it. */
export function unknownId(topology: Topology, kind: 'partition' | 'node', id: string, field?: string): string | null {
  const ids = kind === 'partition' ? topology.partitions.map((p) => p.id) : topology.nodes.map((n) => n.id);
  return ids.includes(id) ? null : `unknown ${kind} ${id}${field ? ` (${field})` : ''}: the broker has ${ids.length} (${listed(ids)})`;
}

/** The loop's status, or null when no loop runs (a notice about pins is then moot). */
/** Partitions below their replication factor as the loop judges them: by its repair timeout, with its repairs in flight. */
export function loopUnderReplicated(topology: Topology, loop: Pick<RebalancerStatus, 'settings' | 'inFlight'>): UnderReplicated[] {
  // A loop started before repairs existed carries settings without the timeout: the default is what it plans with.
  const replaceAfterMs = loop.settings.planner.replaceAfterMs ?? DEFAULT_PLANNER_CONFIG.replaceAfterMs;
  return underReplicated(topology, replaceAfterMs, loop.inFlight.filter((m) => m.op === 'follower_replace'));
}

export async function loopStatusIfAny(client: Client, scope: string): Promise<RebalancerStatus | null> {
  return rebalancerStatus(client, scope).catch((err: unknown) => {
    if (err instanceof MoveRefused && err.code === 'no_rebalancer') return null;
    throw err;
  });
}

/** An operator's reconfiguration of a pinned partition goes ahead; one line saying so, or null when not pinned. */
export function pinNotice(status: Pick<RebalancerStatus, 'pinned'> | null, partition: string): string | null {
  const pin = status?.pinned[partition];
  return pin ? `note: ${partition} is pinned by ${pin.by} (${pin.reason}): the rebalancer leaves it alone, but an operator's request goes ahead` : null;
}

/** A drain of an excluded node, or of one holding pinned partitions, goes ahead; one line saying so, or null. */
export function drainNotice(status: Pick<RebalancerStatus, 'pinned' | 'excluded'> | null, topology: Topology, node: string): string | null {
  if (!status) return null;
  const parts: string[] = [];
  const ex = status.excluded[node];
  if (ex) parts.push(`${node} is excluded from rebalancing by ${ex.by} (${ex.reason})`);
  const pinned = topology.partitions.filter((p) => status.pinned[p.id] && holders(p).includes(node)).map((p) => p.id);
  if (pinned.length > 0) parts.push(`${ex ? '' : `${node} `}holds pinned ${listed(pinned)}`);
  return parts.length > 0 ? `note: ${parts.join(' and ')}: the drain moves every copy off ${node} as asked` : null;
}

/** The drain workflow as its starter sees it: typed handles without the workflow code. */
type Drain = (request: DrainRequest) => Promise<DrainOutcome>;

export interface DrainContext {
  client: Client;
  cluster: Pick<ClusterClient, 'topology'>;
  taskQueue: string;
}

/**
 * Start a drain of `node`, refused up front for an unknown node, a stream copy on it (unless `queuesOnly`), too
 * little room, or a drain already running.
 */
export async function startDrain(ctx: DrainContext, request: DrainRequest): Promise<WorkflowHandle<Drain>> {
  const check = checkDrain(await ctx.cluster.topology(), request.node, request.queuesOnly === true);
  if (!check.ok) throw new MoveRefused(check.code, check.message);
  const workflowId = drainWorkflowId(request.node);
  try {
    return await ctx.client.workflow.start<Drain>('drain', {
      workflowId,
      taskQueue: ctx.taskQueue,
      args: [request],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      staticSummary: `Drain ${request.node}${request.queuesOnly ? ' (queues only)' : ''}: ${request.reason} (${request.by})`,
      staticDetails: `Marks **${request.node}** draining, hands off every partition it owns to an admitted follower, then moves every follower copy off it${request.queuesOnly ? ', leaving its stream copies' : ''}.`,
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      throw new MoveRefused('drain_running', `a drain of ${request.node} is already running (workflow ${workflowId}); \`rebalancer undrain ${request.node}\` cancels it`);
    }
    throw err;
  }
}

export async function drainStatus(client: Client, node: string): Promise<DrainStatus> {
  try {
    return await client.workflow.getHandle(drainWorkflowId(node)).query(drainStatusQuery);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new MoveRefused('no_drain', `no drain of ${node} has run (no workflow ${drainWorkflowId(node)})`);
    throw err;
  }
}

/**
 * A drain's outcome however it ended: returned when completed, in the failure's details when refused, and from
 * its status when cancelled (Temporal keeps no details for a cancelled workflow).
 */
export async function drainOutcome(handle: WorkflowHandle): Promise<DrainOutcome | null> {
  return ((await outcomeOf(handle)) as DrainOutcome | null) ?? (await handle.query(drainStatusQuery)).outcome;
}

/**
 * Undrain: cancel a running drain (it starts no new move, lets the moves in flight end, then clears the mark)
 * and wait for it to end; with no drain running, clear the mark directly.
 */
export async function undrain(ctx: { client: Client; cluster: Pick<ClusterClient, 'setDraining'> }, node: string, reason: string): Promise<DrainOutcome | null> {
  const handle = ctx.client.workflow.getHandle(drainWorkflowId(node));
  const running = await handle.describe().then(
    (d) => d.status.name === 'RUNNING',
    () => false,
  );
  if (!running) {
    await ctx.cluster.setDraining(node, false, reason);
    return null;
  }
  await handle.cancel();
  return drainOutcome(handle);
}
