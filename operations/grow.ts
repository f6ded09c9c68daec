/**
 * Starting a replication-factor increase or a lost-follower replacement: checked against the broker first with
 * the rules of rules/grow-rules.ts, so bad input is refused before anything is written (not even a workflow
 * is started), then started as `reconfigure-<partition>` with its search attributes.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError, WorkflowIdConflictPolicy, WorkflowIdReusePolicy } from '@temporalio/common';
import { ClusterHttpError } from '../cluster/client';
import type { Node, Partition } from '../cluster/contract';
import { reconfigurationWorkflowId, type GrowRequest, type ReconfigurationKind, type ReplaceRequest } from '../rules/definitions';
import type { MoveCheck } from '../rules/follower-move-rules';
import { checkGrow, checkReplace } from '../rules/grow-rules';
import { busyRefusal, MoveRefused, startSearchAttributes, type MovesContext } from './moves';

interface Start {
  partition: string;
  kind: ReconfigurationKind;
  workflowType: string;
  check: (p: Partition, nodes: Node[]) => MoveCheck;
  args: unknown[];
  source: string | null;
  target: string;
  summary: string;
  details: string;
}

async function start(ctx: MovesContext, s: Start): Promise<WorkflowHandle> {
  const { partition } = s;
  const view = await ctx.cluster.partition(partition).catch((err: unknown) => {
    if (err instanceof ClusterHttpError && err.status === 404) {
      throw new MoveRefused('unknown_partition', `partition ${partition} does not exist in the cluster`);
    }
    throw err;
  });
  const { nodes } = await ctx.cluster.nodes();
  const check = s.check(view.partition, nodes);
  if (!check.ok) throw new MoveRefused(check.code, check.message);
  const workflowId = reconfigurationWorkflowId(partition);
  const busy = busyRefusal(view.partition);
  if (busy) {
    const running = await ctx.client.workflow.getHandle(workflowId).describe().then((d) => d.status.name === 'RUNNING', () => false);
    throw running ? alreadyRunning(partition, workflowId) : busy;
  }
  try {
    return await ctx.client.workflow.start(s.workflowType, {
      workflowId,
      taskQueue: ctx.taskQueue,
      args: s.args,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      typedSearchAttributes: startSearchAttributes(partition, s.kind, s.source ?? null, s.target),
      staticSummary: s.summary,
      staticDetails: s.details,
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw alreadyRunning(partition, workflowId);
    throw err;
  }
}

function alreadyRunning(partition: string, workflowId: string): MoveRefused {
  return new MoveRefused(
    'reconfiguration_running',
    `a reconfiguration of ${partition} is already running: workflow ${workflowId}; wait for it or cancel it with \`rebalancer cancel ${partition}\``,
  );
}

/** Replication-factor increase of `partition` by one copy on `to`. */
export function startGrow(ctx: MovesContext, request: GrowRequest): Promise<WorkflowHandle> {
  const { partition, to } = request;
  return start(ctx, {
    partition,
    kind: 'grow',
    workflowType: 'replicationIncrease',
    check: (p, nodes) => checkGrow(p, nodes, to),
    args: [request],
    source: null,
    target: to,
    summary: `Add a copy of ${partition} on ${to} (replication-factor increase, ${request.origin})`,
    details:
      `Raises the replication factor of queue partition **${partition}** by one copy on **${to}**: add ${to} as a learner, ` +
      `wait until it is caught up and admitted, then promote it and raise the replication factor in one guarded write, ` +
      `so W changes only when ${to} starts to count. Nothing is removed.`,
  });
}

/** Replacement of the lost follower `lost` of `partition` by `with`. */
export function startReplace(ctx: MovesContext, request: ReplaceRequest): Promise<WorkflowHandle> {
  const { partition, lost, with: withNode } = request;
  return start(ctx, {
    partition,
    kind: 'replace',
    workflowType: 'followerReplacement',
    check: (p, nodes) => checkReplace(p, nodes, lost, withNode),
    args: [request],
    source: lost,
    target: withNode,
    summary: `Replace the lost follower ${lost} of ${partition} with ${withNode} (${request.origin})`,
    details:
      `Replaces the lost follower copy of queue partition **${partition}** on **${lost}** (its node is down) with a new copy on ` +
      `**${withNode}**: add ${withNode} as a learner, wait until it is caught up and admitted, swap it in for ${lost} (boundary B), ` +
      `wait until ${withNode} is durable at B, then remove ${lost}, which never has to come back.`,
  });
}
