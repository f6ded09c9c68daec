/**
 * Owner move from A onto T, a node that holds no copy yet (the note: "an owner move onto a node that is not
 * yet a follower is a follower move followed by a handoff"): the follower copy of `via` moves to T, then A
 * hands the owner to T. One workflow (id `reconfigure-<partition>`), one status: `stage` says which half runs,
 * `via` whose copy moved. A stays a follower; the replica count and W never change.
 */
import type { MoveOutcome, OwnerMoveRequest } from '../rules/definitions';
import { checkOwnerMove } from '../rules/handoff-rules';
import { handOff, runOperation } from './owner-handoff';
import { moveFollower } from './follower-move';

export async function ownerMove(request: OwnerMoveRequest): Promise<MoveOutcome> {
  const { partition, from: A, to: T, origin } = request;
  return runOperation('owner-move', request, async (op) => {
    op.show({ stage: 'follower_move', via: request.via ?? null });
    // ---- validating: the rules the CLI checked (the client fixed `via`), against what the broker says now.
    const ctx = await op.watch.read();
    const check = checkOwnerMove(ctx.view, ctx.nodes, A, T, request.via);
    if (!check.ok) return { status: 'aborted', partition, code: check.code, reason: check.message };
    const via = check.via;
    op.show({ via });

    // ---- stage 1: the follower copy of `via` moves to T, which becomes an admitted follower.
    const moved = await moveFollower(op, { partition, from: via, to: T, origin, ...(request.timing ? { timing: request.timing } : {}) });
    if (moved.status === 'cancelled') return moved;
    if (moved.status === 'aborted') {
      return { ...moved, reason: `the follower move of ${via} to ${T} ended before ${T} could take the owner: ${moved.reason}; ${A} stays the owner` };
    }

    // ---- stage 2: A hands the owner to T; T is now a follower, so a cancel before the commit is accepted again.
    op.show({ stage: 'handoff' });
    op.acceptCancel();
    const handed = await handOff(op, A, T, request.quietPoint);
    if (handed.status === 'completed') return { ...handed, boundary: moved.boundary };
    const kept = `${T} is a follower of ${partition} now (the copy of ${via} moved there at boundary ${moved.boundary}) and ${A} stays the owner`;
    return { ...handed, reason: `${handed.reason}; ${kept}` };
  });
}
