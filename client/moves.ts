/**
 * Typed helpers to start, list, inspect and cancel moves: used by the CLI, the admin API and tests.
 * Starting checks the request against the broker first, so bad input is refused before anything is
 * written (not even a workflow is started).
 */
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowUpdateFailedError,
  type Client,
  type WorkflowHandle,
} from '@temporalio/client';
import { ClusterHttpError, type ClusterClient } from '../cluster/client';
import { cancelUpdate, reconfigurationWorkflowId, statusQuery, type FollowerMoveRequest, type MoveOutcome, type MoveStatus } from '../workflows/definitions';
import { checkFollowerMove } from '../workflows/follower-move-rules';
import { KindKey, PartitionKey, PhaseKey, SourceKey, TargetKey } from '../workflows/search-attributes';
import type { followerMove } from '../workflows/follower-move';

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

export async function startFollowerMove(ctx: MovesContext, request: FollowerMoveRequest): Promise<WorkflowHandle<typeof followerMove>> {
  const { partition, from, to } = request;
  let view;
  try {
    view = await ctx.cluster.partition(partition);
  } catch (err) {
    if (err instanceof ClusterHttpError && err.status === 404) {
      throw new MoveRefused('unknown_partition', `partition ${partition} does not exist in the cluster`);
    }
    throw err;
  }
  const { nodes } = await ctx.cluster.nodes();
  const check = checkFollowerMove(view.partition, nodes, from, to);
  if (!check.ok) throw new MoveRefused(check.code, check.message);

  const workflowId = reconfigurationWorkflowId(partition);
  try {
    return await ctx.client.workflow.start<typeof followerMove>('followerMove', {
      workflowId,
      taskQueue: ctx.taskQueue,
      args: [request],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      typedSearchAttributes: [
        { key: PartitionKey, value: partition },
        { key: KindKey, value: 'follower-move' },
        { key: PhaseKey, value: 'validating' },
        { key: SourceKey, value: from },
        { key: TargetKey, value: to },
      ],
      staticSummary: `Move follower of ${partition}: ${from} → ${to} (${request.origin})`,
      staticDetails:
        `Moves the follower copy of queue partition **${partition}** from **${from}** to **${to}** without a fence: ` +
        `add ${to} as a learner, wait until it is caught up and admitted, swap who counts (boundary B), ` +
        `wait until ${to} is durable at B, then remove ${from} (it keeps its data for the grace period).`,
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      const running = await describeRunning(ctx.client, workflowId);
      throw new MoveRefused(
        'reconfiguration_running',
        `a reconfiguration of ${partition} is already running: workflow ${workflowId}${running ? ` (${running})` : ''}; ` +
          `wait for it or cancel it with \`rebalancer cancel ${partition}\``,
      );
    }
    throw err;
  }
}

async function describeRunning(client: Client, workflowId: string): Promise<string | null> {
  try {
    const s = await client.workflow.getHandle(workflowId).query(statusQuery);
    return `${s.kind} ${s.from} -> ${s.to}, phase ${s.phase}`;
  } catch {
    return null;
  }
}

/** Status of every move in progress, newest first. */
export async function listMoves(client: Client): Promise<MoveStatus[]> {
  const out: MoveStatus[] = [];
  for await (const wf of client.workflow.list({ query: `ExecutionStatus = "Running" AND WorkflowId STARTS_WITH "reconfigure-"` })) {
    try {
      out.push(await client.workflow.getHandle(wf.workflowId).query(statusQuery));
    } catch {
      // It ended between the list and the query: no longer in progress.
    }
  }
  return out.sort((a, b) => a.partition.localeCompare(b.partition));
}

export interface MoveDetail {
  workflowId: string;
  runId: string;
  running: boolean;
  status: MoveStatus | null;
  outcome: MoveOutcome | null;
}

/** The latest reconfiguration of a partition, running or ended. */
export async function showMove(client: Client, partition: string): Promise<MoveDetail> {
  const workflowId = reconfigurationWorkflowId(partition);
  const handle = client.workflow.getHandle<typeof followerMove>(workflowId);
  let description;
  try {
    description = await handle.describe();
  } catch {
    throw new MoveRefused('no_move', `no move has run on partition ${partition} (no workflow ${workflowId})`);
  }
  const running = description.status.name === 'RUNNING';
  const status = await handle.query(statusQuery).catch(() => null);
  const outcome = running ? null : await handle.result().catch(() => null);
  return { workflowId, runId: description.runId, running, status, outcome: outcome ?? status?.outcome ?? null };
}

/** Operator cancel: accepted before the swap; refused after it, with the reason and the way forward. */
export async function cancelMove(client: Client, partition: string, reason: string): Promise<MoveStatus> {
  const handle = client.workflow.getHandle<typeof followerMove>(reconfigurationWorkflowId(partition));
  try {
    await handle.describe();
  } catch {
    throw new MoveRefused('no_move', `no move is running on partition ${partition}`);
  }
  try {
    await handle.executeUpdate(cancelUpdate, { args: [{ reason }] });
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError) {
      throw new MoveRefused('cancel_refused', err.cause?.message ?? err.message);
    }
    throw new MoveRefused('no_move', `no move is running on partition ${partition}: ${(err as Error).message}`);
  }
  return handle.query(statusQuery);
}
