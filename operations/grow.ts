/**
 * Starting a replication-factor increase or a lost-follower replacement: checked against the broker first with
 * the rules of rules/grow-rules.ts, so bad input is refused before anything is written (not even a workflow
 * is started), then started as `reconfigure-<partition>` with its search attributes.
 */
import type { WorkflowHandle } from '@temporalio/client';
import type { GrowRequest, ReplaceRequest } from '../rules/definitions';
import { checkGrow, checkReplace } from '../rules/grow-rules';
import { startReconfiguration, type MovesContext, type Reconfiguration } from './moves';

/** Replication-factor increase of `partition` by one copy on `to`. */
export function startGrow(ctx: MovesContext, request: GrowRequest): Promise<WorkflowHandle<Reconfiguration<GrowRequest>>> {
  const { partition, to } = request;
  return startReconfiguration(ctx, {
    kind: 'grow',
    partition,
    source: null,
    target: to,
    check: (view, nodes) => checkGrow(view.partition, nodes, to),
    start: () => ({
      request,
      summary: `Add a copy of ${partition} on ${to} (replication-factor increase, ${request.origin})`,
      details:
        `Raises the replication factor of queue partition **${partition}** by one copy on **${to}**: add ${to} as a learner, ` +
        `wait until it is caught up and admitted, then promote it and raise the replication factor in one guarded write, ` +
        `so W changes only when ${to} starts to count. Nothing is removed.`,
    }),
  });
}

/** Replacement of the lost follower `lost` of `partition` by `with`. */
export function startReplace(ctx: MovesContext, request: ReplaceRequest): Promise<WorkflowHandle<Reconfiguration<ReplaceRequest>>> {
  const { partition, lost, with: withNode } = request;
  return startReconfiguration(ctx, {
    kind: 'replace',
    partition,
    source: lost,
    target: withNode,
    check: (view, nodes) => checkReplace(view.partition, nodes, lost, withNode),
    start: () => ({
      request,
      summary: `Replace the lost follower ${lost} of ${partition} with ${withNode} (${request.origin})`,
      details:
        `Replaces the lost follower copy of queue partition **${partition}** on **${lost}** (its node is down) with a new copy on ` +
        `**${withNode}**: add ${withNode} as a learner, wait until it is caught up and admitted, swap it in for ${lost} (boundary B), ` +
        `wait until ${withNode} is durable at B, then remove ${lost}, which never has to come back.`,
    }),
  });
}
