/**
 * Typed starters for a planned owner handoff and an owner move, used by the CLI, the admin API and tests.
 * Like a follower move, each is checked against the broker first, so bad input is refused (MoveRefused)
 * before anything is written and before a workflow starts.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError, WorkflowIdConflictPolicy, WorkflowIdReusePolicy } from '@temporalio/common';
import { ClusterHttpError } from '../cluster/client';
import type { PartitionView } from '../cluster/contract';
import { reconfigurationWorkflowId, type FollowerMoveRequest, type HandoffRequest, type OwnerMoveRequest, type ReconfigurationKind } from '../rules/definitions';
import { checkHandoff, checkOwnerMove } from '../rules/handoff-rules';
import { alreadyRunning, busyRefusal, MoveRefused, startFollowerMove, startSearchAttributes, type MovesContext } from './moves';
import type { ownerHandoff } from '../workflows/owner-handoff';
import type { ownerMove } from '../workflows/owner-move';

async function readView(ctx: MovesContext, partition: string): Promise<PartitionView> {
  try {
    return await ctx.cluster.partition(partition);
  } catch (err) {
    if (err instanceof ClusterHttpError && err.status === 404) {
      throw new MoveRefused('unknown_partition', `partition ${partition} does not exist in the cluster`);
    }
    throw err;
  }
}

/** Refuses a partition with a change in flight: named as the running workflow when it is one of ours. */
async function refuseIfBusy(ctx: MovesContext, view: PartitionView): Promise<void> {
  const busy = busyRefusal(view.partition);
  if (!busy) return;
  const workflowId = reconfigurationWorkflowId(view.partition.id);
  const running = await ctx.client.workflow.getHandle(workflowId).describe().then((d) => d.status.name === 'RUNNING', () => false);
  if (running) throw await alreadyRunning(ctx.client, view.partition.id, workflowId);
  throw busy;
}

async function start<W extends typeof ownerHandoff | typeof ownerMove>(
  ctx: MovesContext,
  type: 'ownerHandoff' | 'ownerMove',
  kind: ReconfigurationKind,
  request: Parameters<W>[0],
  summary: string,
  details: string,
): Promise<WorkflowHandle<W>> {
  const { partition, from, to } = request;
  const workflowId = reconfigurationWorkflowId(partition);
  try {
    return await ctx.client.workflow.start<W>(type, {
      workflowId,
      taskQueue: ctx.taskQueue,
      args: [request] as Parameters<W>,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      typedSearchAttributes: startSearchAttributes(partition, kind, from, to),
      staticSummary: summary,
      staticDetails: details,
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw await alreadyRunning(ctx.client, partition, workflowId);
    throw err;
  }
}

const because = (reason: string | undefined): string => (reason ? `\n\nReason given: ${reason}` : '');

/** Planned owner handoff from the owner A to D, an admitted, caught-up follower. */
export async function startHandoff(ctx: MovesContext, request: HandoffRequest): Promise<WorkflowHandle<typeof ownerHandoff>> {
  const { partition, from, to } = request;
  const view = await readView(ctx, partition);
  const { nodes } = await ctx.cluster.nodes();
  const check = checkHandoff(view, nodes, from, to);
  if (!check.ok) throw new MoveRefused(check.code, check.message);
  await refuseIfBusy(ctx, view);
  return start<typeof ownerHandoff>(
    ctx,
    'ownerHandoff',
    'owner-handoff',
    request,
    `Hand off the owner of ${partition}: ${from} → ${to} (${request.origin})`,
    `Planned owner handoff of queue partition **${partition}** from **${from}** to **${to}**: at a quiet point ${from} closes ` +
      `admission and reports its final boundary, every counted copy becomes durable at it, one guarded write commits ${to} ` +
      `as owner at epoch + 1 with a continuation certificate, and ${to} reopens admission. ${from} stays a follower; ` +
      `the replica count and W do not change.${because(request.reason)}`,
  );
}

/** Owner move from A onto T, not yet a replica: a follower move of `via` to T, then a handoff from A to T. */
export async function startOwnerMove(ctx: MovesContext, request: OwnerMoveRequest): Promise<WorkflowHandle<typeof ownerMove>> {
  const { partition, from, to } = request;
  const view = await readView(ctx, partition);
  const { nodes } = await ctx.cluster.nodes();
  const check = checkOwnerMove(view, nodes, from, to, request.via);
  if (!check.ok) throw new MoveRefused(check.code, check.message);
  await refuseIfBusy(ctx, view);
  const via = check.via;
  return start<typeof ownerMove>(
    ctx,
    'ownerMove',
    'owner-move',
    // The via the check chose is fixed here, so the workflow moves the follower the operator was told about.
    { ...request, via },
    `Move the owner of ${partition}: ${from} → ${to} via ${via} (${request.origin})`,
    `Owner move of queue partition **${partition}** from **${from}** onto **${to}**, which holds no copy yet: first the ` +
      `follower copy of **${via}** moves to ${to} (${check.why}), then a planned handoff makes ${to} the owner; ` +
      `${from} stays a follower.${because(request.reason)}`,
  );
}

/**
 * `rebalancer move <partition> --from X --to T`: an owner move when X owns the partition, else a follower
 * move. Says which it started.
 */
export async function startMoveFrom(
  ctx: MovesContext,
  request: FollowerMoveRequest & Pick<OwnerMoveRequest, 'via' | 'quietPoint'>,
): Promise<{ kind: 'follower-move' | 'owner-move'; handle: WorkflowHandle }> {
  const view = await readView(ctx, request.partition);
  const { via, quietPoint, ...follower } = request;
  if (view.partition.owner === request.from) {
    const owner: OwnerMoveRequest = { ...follower, ...(via ? { via } : {}), ...(quietPoint ? { quietPoint } : {}) };
    return { kind: 'owner-move', handle: await startOwnerMove(ctx, owner) };
  }
  return { kind: 'follower-move', handle: await startFollowerMove(ctx, follower) };
}
