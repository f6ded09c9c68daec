/**
 * Move the follower copy of one queue partition from R to T without a fence (the note's "Moving a follower:
 * two steps"), composed of the step library. Before the swap every exit drops the learner; past it the ways
 * on are finishing, ordinary recovery, or the swap back once T is lost (down for swapBackAfterMs, or an
 * operator's cancel while T is down). Two workflow types run it (docs/versioning.md): `followerMoveV3`, which
 * takes every patch of the step library without asking, and `followerMoveV2`, which asks them, for the
 * executions started before V3.
 */
import type { Refusal } from '../cluster/contract';
import type { FollowerMoveRequest, MoveOutcome } from '../rules/definitions';
import { checkFollowerMove, classifyRemovalRefusal } from '../rules/follower-move-rules';
import { refusedRemoval, removeOnceCovered, stuckAfterSwap, untilCounted } from './steps/new-copy';
import { begin, Operation } from './steps/operation';
import { SWAP_BACK } from './steps/patches';
import { removeLeaving } from './steps/remove-leaving';
import { rejection, runStep } from './steps/step';
import { SWAP_BACK_AFTER_MS, swapBack, swapThenRemove, type Swapped, targetLostInterrupts } from './steps/swap';
import type { Interrupt } from './steps/watch';

/**
 * The follower move as the starters start it. Its patches are folded: a `patched()` call writes a marker and an
 * upsert of the TemporalChangeVersion search attribute (a visibility write) in every new execution, 8 of each a
 * move, 16 of its 52 history events.
 */
export async function followerMoveV3(request: FollowerMoveRequest): Promise<MoveOutcome> {
  return followerMove(request, true);
}

/** The follower move before its patches were folded: it asks each, so the executions it started replay. */
export async function followerMoveV2(request: FollowerMoveRequest): Promise<MoveOutcome> {
  return followerMove(request, false);
}

function followerMove(request: FollowerMoveRequest, folded: boolean): Promise<MoveOutcome> {
  const { partition, from, to, origin } = request;
  const op = begin({ kind: 'follower-move', partition, from, to, origin }, request, folded);
  return op.run(() => moveFollower(op, request));
}

/** The follower move as a composition run inside an operation: its own workflow, or an owner move's first stage. */
export async function moveFollower(op: Operation, request: FollowerMoveRequest): Promise<MoveOutcome> {
  const { partition, from: R, to: T, origin } = request;
  const watch = op.watch;
  const stuck = (B: number, code: string, why: string) => stuckAfterSwap(op, R, T, B, code, why);

  /**
   * The way out when T is lost after the swap (docs/operations/follower-move.md, "Swap back when T is lost after the
   * swap"): R counts again from B', then T goes once R covers B'. Ends cancelled (an operator's cancel while T was
   * down) or aborted target_lost.
   */
  const swapBackThenRemove = async (B: number, why: Interrupt): Promise<MoveOutcome> => {
    const lostWords = `${T} was lost after the swap at boundary ${B}`;
    const back = await runStep(op, swapBack(op, R, T));
    if (!back.ok) {
      const refused = whyEnded(back);
      return stuck(B, refused.code, `${lostWords} and the swap back was refused: ${refused.message}`);
    }
    const B2 = back.value;
    const removed = await runStep(op, removeLeaving(op, T, R, B2, (r) => classifyRemovalRefusal(r, R)));
    if (!removed.ok) {
      const r = whyEnded(removed);
      return {
        status: 'aborted',
        partition,
        code: r.code,
        reason:
          `${lostWords}; swapped back at B' ${B2}: ${R} counts again and ${T} is leaving, but its removal was refused: ${r.message}. ` +
          `Remove ${T} with the guarded write remove-leaving once ${R} is durable at ${B2}.`,
      };
    }
    const reason = `${lostWords}; swapped back at B' ${B2}: ${R} counts again and ${T} was removed once ${R} covered B'`;
    if (why === 'cancel') return { status: 'cancelled', partition, reason: `${op.cancelReason ?? 'cancelled'}: ${reason}` };
    return { status: 'aborted', partition, code: 'target_lost', reason: `${reason} (${T} down for ${Math.round((watch.timing.swapBackAfterMs ?? SWAP_BACK_AFTER_MS) / 1000)}s)` };
  };

  /** Step 2, past the swap: finish, go through recovery or (with the swap back) swap back once T is lost. */
  const afterSwap = async ({ boundary: B, removal }: Swapped, canSwapBack: boolean): Promise<MoveOutcome> => {
    // The removal chained to the swap: accepted, the step below finds R gone; refused for a passing reason, the
    // step tries again once T covers B.
    if (removal && 'rejected' in removal) return stuck(B, removal.rejected.type, `the broker rejected the removal of ${R} for good: ${removal.rejected.message}`);
    if (removal && !removal.ok && ['final', 'not_leaving'].includes(classifyRemovalRefusal(removal.refusal, T))) return refusedRemoval(op, R, T, B, removal.refusal);
    // ---- cover B, then step 2: remove R; it keeps its data as a retained copy for the grace period.
    const lost = canSwapBack ? { interrupts: targetLostInterrupts(op, T), then: (why: Interrupt) => swapBackThenRemove(B, why) } : undefined;
    return removeOnceCovered(op, R, T, B, lost);
  };

  // ---- validating (the same rules the CLI checked, against what the broker says now), step 0, then step 1: T counts
  // instead of R and the owner records boundary B; step 2 is tried with it.
  const counted = await untilCounted({
    op,
    to: T,
    origin,
    counting: 'the swap',
    count: (interrupts) => swapThenRemove(op, T, R, interrupts),
    check: (ctx) => checkFollowerMove(ctx.view.partition, ctx.nodes, R, T),
  });
  if ('ended' in counted) return counted.ended;
  const swapped = counted.value;
  const B = swapped.boundary;
  // Histories saved before the swap back existed replay without it.
  const canSwapBack = op.takes(SWAP_BACK);
  op.refuseCancel(() =>
    canSwapBack && !watch.live(T)
      ? null
      : `refused: ${partition} already counts ${T} instead of ${R} (swap at boundary ${B}); undoing it would need another ` +
        `swap. The move will finish by removing ${R} once ${T} is durable at ${B} (now ${op.snapshot().targetDurable ?? 'unknown'}); ` +
        `${R} keeps its data until then. To put the copy back, wait for this move to complete and move it from ${T} to ${R}` +
        (canSwapBack ? ` (while ${T} is down, a cancel swaps back: ${R} counts again).` : '.'),
  );
  try {
    return await afterSwap(swapped, canSwapBack);
  } catch (err) {
    // Past the swap too, a request the broker rejects for good ends the move with its reason.
    const cause = rejection(err);
    if (!cause) throw err;
    return stuck(B, cause.type ?? 'rejected', `the broker rejected a request while ${op.phase.replace(/_/g, ' ')}: ${cause.message}`);
  }
}

/** A step that did not finish, as one code and message: its refusal, or the interrupt that ended it. */
function whyEnded(end: { ok: false; interrupt: Interrupt } | { ok: false; refusal: Refusal }): { code: string; message: string } {
  return 'refusal' in end ? end.refusal : { code: end.interrupt, message: end.interrupt };
}
