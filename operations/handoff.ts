/**
 * Typed starters for a planned owner handoff and an owner move, used by the CLI, the admin API and tests.
 * Like a follower move, each is checked against the broker first, so bad input is refused (MoveRefused)
 * before anything is written and before a workflow starts.
 */
import type { WorkflowHandle } from '@temporalio/client';
import type { FollowerMoveRequest, HandoffRequest, OwnerMoveRequest } from '../rules/definitions';
import { checkHandoff, checkOwnerMove } from '../rules/handoff-rules';
import { readView, startFollowerMove, startReconfiguration, type MovesContext, type Reconfiguration } from './moves';

const because = (reason: string | undefined): string => (reason ? `\n\nReason given: ${reason}` : '');

/** Planned owner handoff from the owner A to D, an admitted, caught-up follower. */
export function startHandoff(ctx: MovesContext, request: HandoffRequest): Promise<WorkflowHandle<Reconfiguration<HandoffRequest>>> {
  const { partition, from, to } = request;
  return startReconfiguration(ctx, {
    kind: 'owner-handoff',
    partition,
    source: from,
    target: to,
    check: (view, nodes) => checkHandoff(view, nodes, from, to),
    start: () => ({
      request,
      summary: `Hand off the owner of ${partition}: ${from} → ${to} (${request.origin})`,
      details:
        `Planned owner handoff of queue partition **${partition}** from **${from}** to **${to}**: at a quiet point ${from} closes ` +
        `admission and reports its final boundary, every counted copy becomes durable at it, one guarded write commits ${to} ` +
        `as owner at epoch + 1 with a continuation certificate, and ${to} reopens admission. ${from} stays a follower; ` +
        `the replica count and W do not change.${because(request.reason)}`,
    }),
  });
}

/** Owner move from A onto T, not yet a replica: a follower move of `via` to T, then a handoff from A to T. */
export function startOwnerMove(ctx: MovesContext, request: OwnerMoveRequest): Promise<WorkflowHandle<Reconfiguration<OwnerMoveRequest>>> {
  const { partition, from, to } = request;
  return startReconfiguration(ctx, {
    kind: 'owner-move',
    partition,
    source: from,
    target: to,
    check: (view, nodes) => checkOwnerMove(view, nodes, from, to, request.via),
    start: ({ via, why }) => ({
      // The via the check chose is fixed here, so the workflow moves the follower the operator was told about.
      request: { ...request, via },
      summary: `Move the owner of ${partition}: ${from} → ${to} via ${via} (${request.origin})`,
      details:
        `Owner move of queue partition **${partition}** from **${from}** onto **${to}**, which holds no copy yet: first the ` +
        `follower copy of **${via}** moves to ${to} (${why}), then a planned handoff makes ${to} the owner; ` +
        `${from} stays a follower.${because(request.reason)}`,
    }),
  });
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
