/**
 * Move the follower copy of one queue partition from R to T without a fence (the note's "Moving a follower:
 * two steps"), composed of the step library. Before the swap every exit drops the learner; past it the ways
 * on are finishing, ordinary recovery, or the swap back once T is lost (down for swapBackAfterMs, or an
 * operator's cancel while T is down). The workflow type that replaced `followerMove` (kept in
 * legacy/ so running moves finish and saved histories replay).
 */
import { patched } from '@temporalio/workflow';
import type { Refusal } from '../cluster/contract';
import type { FollowerMoveRequest, MoveOutcome } from '../rules/definitions';
import { checkFollowerMove, classifyRemovalRefusal } from '../rules/follower-move-rules';
import { formatBytes } from '../rules/format';
import { begin, Operation } from './steps/operation';
import { addLearner, dropLearnerAndSay, learnerInterrupts, waitForAdmission } from './steps/learner';
import { removeLeaving } from './steps/remove-leaving';
import { rejection, runStep, waitForActivation } from './steps/step';
import { SWAP_BACK_AFTER_MS, swapBack, swapThenRemove, type Swapped, targetLostInterrupts } from './steps/swap';
import type { Interrupt } from './steps/watch';

export async function followerMoveV2(request: FollowerMoveRequest): Promise<MoveOutcome> {
  const { partition, from, to, origin } = request;
  const op = begin({ kind: 'follower-move', partition, from, to, origin }, request);
  return op.run(() => moveFollower(op, request));
}

/** The follower move as a composition run inside an operation: its own workflow, or an owner move's first stage. */
export async function moveFollower(op: Operation, request: FollowerMoveRequest): Promise<MoveOutcome> {
  const { partition, from: R, to: T, origin } = request;
  const watch = op.watch;
  const aborted = (code: string, reason: string): MoveOutcome => ({ status: 'aborted', partition, code, reason });
  const cancelled = (): MoveOutcome => ({ status: 'cancelled', partition, reason: op.cancelReason ?? 'cancelled' });
  /** An exit before the swap: nothing counted changed, and the learner goes. */
  const abortBeforeSwap = async (code: string, why: string): Promise<MoveOutcome> => aborted(code, `${why}; ${await dropLearnerAndSay(op, T)} before the swap`);
  const cancelBeforeSwap = async (): Promise<MoveOutcome> => {
    await dropLearnerAndSay(op, T);
    return cancelled();
  };
  /** The move cannot finish by itself past the swap: end it saying what holds and what the operator can do. */
  const stuckAfterSwap = (B: number, code: string, why: string): MoveOutcome =>
    aborted(
      code,
      `${why}. ${T} counts since the swap at boundary ${B}; ${R} stays leaving, eligible and keeps its data, so ` +
        `nothing is lost. Fix what the broker names, then remove ${R} with the guarded write remove-leaving.`,
    );
  const whileDoing = () => `while ${op.status.phase.replace(/_/g, ' ')}`;

  /** Step 0 and step 1, retried after a recovery: the outcome when the move ended, or what the swap did. */
  const beforeSwap = async (): Promise<MoveOutcome | Swapped> => {
    const learner = learnerInterrupts(op, T);
    // Adding T: only a recovery or a cancel interrupts (a refusal says the rest).
    const adding = (): Interrupt | null => (watch.recoveryPending ? 'recovery' : op.cancelReason !== null ? 'cancel' : null);
    for (;;) {
      // ---- step 0: add T as a learner (or reuse it after a recovery).
      const added = await runStep(op, addLearner(op, T, adding));
      if (!added.ok) {
        if ('refusal' in added) return aborted(added.refusal.code, `${T} was not added: ${added.refusal.message}`);
        if (added.interrupt === 'cancel') return cancelled();
        if (origin === 'planner') {
          return aborted('pending_recovery', `a recovery opened on ${partition} before ${T} was added; the planner decides again after activation`);
        }
        await runStep(op, waitForActivation(op));
        await watch.read();
        continue;
      }

      // ---- admission: T catches up in the background and the broker admits it to the accepted history.
      let interrupt: Interrupt;
      const admitted = await runStep(op, waitForAdmission(op, T, learner));
      if (admitted.ok) {
        // ---- step 1: swap who counts; the owner records boundary B.
        const swapped = await runStep(op, swapThenRemove(op, T, R, learner));
        if (swapped.ok) return swapped.value;
        if ('refusal' in swapped) {
          // The broker's word that T is down: a failed target never starts to count.
          if (swapped.refusal.code !== 'node_down') return abortBeforeSwap(swapped.refusal.code, `the swap was refused: ${swapped.refusal.message}`);
          interrupt = 'node_down';
        } else interrupt = swapped.interrupt;
      } else if ('interrupt' in admitted) interrupt = admitted.interrupt;
      else return abortBeforeSwap('rejected', 'admission ended without an interrupt');

      // ---- an exit before the swap: nothing counted changed.
      const transfer = watch.transfer(T);
      switch (interrupt) {
        case 'cancel':
          return cancelBeforeSwap();
        case 'node_down':
          return abortBeforeSwap('target_down', `${T} failed before the swap; nothing counted changed`);
        case 'stalled':
          return abortBeforeSwap('stalled', `${T} made no progress for ${Math.round(watch.stalledFor(T) / 1000)}s`);
        case 'deadline':
          return abortBeforeSwap('catch_up_timeout', `${T} did not catch up within the time allowed for ${formatBytes(transfer?.bytesToCopy ?? 0)}`);
        case 'recovery':
          break;
      }
      // A recovery cancels the move: an operator's move waits for activation and tries again under the new
      // epoch, reusing T if it is still a learner; a planner's move ends and the planner decides again.
      await runStep(op, waitForActivation(op));
      if (op.cancelReason !== null) return cancelBeforeSwap();
      if (origin === 'planner') return abortBeforeSwap('pending_recovery', `a recovery on ${partition} cancelled the move before the swap`);
      op.status.retries++;
      const ctx = await watch.read();
      const again = checkFollowerMove({ ...ctx.view.partition, learners: ctx.view.partition.learners.filter((n) => n !== T) }, ctx.nodes, R, T);
      if (!again.ok) return abortBeforeSwap(again.code, `after the recovery the move no longer applies: ${again.message}`);
    }
  };

  /** A refusal of step 2 that does not pass by itself: R may already be gone; otherwise the move is stuck. */
  const refusedRemoval = async (B: number, r: Refusal): Promise<MoveOutcome> => {
    if (r.code !== 'not_leaving') return stuckAfterSwap(B, r.code, `the broker refused to remove ${R} for a reason that does not pass by itself: ${r.message}`);
    const { view } = await watch.read();
    const p = view.partition;
    if (p.leaving === null && !p.history.some((h) => h.node === R) && p.followers.includes(T)) {
      return { status: 'completed', partition, from: R, to: T, boundary: B, epoch: watch.epoch };
    }
    return aborted(r.code, `${R} is no longer leaving ${partition}: ${r.message}`);
  };

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
      return stuckAfterSwap(B, refused.code, `${lostWords} and the swap back was refused: ${refused.message}`);
    }
    const B2 = back.value;
    const removed = await runStep(op, removeLeaving(op, T, R, B2, (r) => classifyRemovalRefusal(r, R)));
    if (!removed.ok) {
      const r = whyEnded(removed);
      return aborted(
        r.code,
        `${lostWords}; swapped back at B' ${B2}: ${R} counts again and ${T} is leaving, but its removal was refused: ${r.message}. ` +
          `Remove ${T} with the guarded write remove-leaving once ${R} is durable at ${B2}.`,
      );
    }
    const reason = `${lostWords}; swapped back at B' ${B2}: ${R} counts again and ${T} was removed once ${R} covered B'`;
    if (why === 'cancel') return { status: 'cancelled', partition, reason: `${op.cancelReason ?? 'cancelled'}: ${reason}` };
    return aborted('target_lost', `${reason} (${T} down for ${Math.round((watch.timing.swapBackAfterMs ?? SWAP_BACK_AFTER_MS) / 1000)}s)`);
  };

  /** Step 2, past the swap: finish, go through recovery or (with the swap back) swap back once T is lost. */
  const afterSwap = async ({ boundary: B, removal }: Swapped, canSwapBack: boolean): Promise<MoveOutcome> => {
    // The removal chained to the swap: accepted, the step below finds R gone; refused for a passing reason, the
    // step tries again once T covers B.
    if (removal && 'rejected' in removal) return stuckAfterSwap(B, removal.rejected.type, `the broker rejected the removal of ${R} for good: ${removal.rejected.message}`);
    if (removal && !removal.ok && ['final', 'not_leaving'].includes(classifyRemovalRefusal(removal.refusal, T))) return refusedRemoval(B, removal.refusal);
    // ---- cover B, then step 2: remove R; it keeps its data as a retained copy for the grace period.
    const lost = canSwapBack ? targetLostInterrupts(op, T) : undefined;
    const removed = await runStep(op, removeLeaving(op, R, T, B, (r) => classifyRemovalRefusal(r, T), lost));
    if (removed.ok) return { status: 'completed', partition, from: R, to: T, boundary: B, epoch: watch.epoch };
    // Only the swap back's interrupts end the removal other than by a refusal.
    if ('interrupt' in removed) return swapBackThenRemove(B, removed.interrupt);
    return refusedRemoval(B, removed.refusal);
  };

  // ---- validating: the same rules the CLI checked, against what the broker says now.
  let ctx;
  try {
    ctx = await watch.read();
  } catch (err) {
    const cause = rejection(err);
    if (cause) return aborted(cause.type ?? 'rejected', cause.message);
    throw err;
  }
  const check = checkFollowerMove(ctx.view.partition, ctx.nodes, R, T);
  if (!check.ok) return aborted(check.code, check.message);

  let before: MoveOutcome | Swapped;
  try {
    before = await beforeSwap();
  } catch (err) {
    // Every exit before the swap drops the learner, a request the broker rejects for good included.
    const cause = rejection(err);
    if (!cause || op.status.boundary !== null) throw err;
    return abortBeforeSwap(cause.type ?? 'rejected', `the broker rejected a request ${whileDoing()}: ${cause.message}`);
  }
  if ('status' in before) return before;
  const swapped = before;
  const B = swapped.boundary;
  // Histories saved before the swap back existed replay without it.
  const canSwapBack = patched('swap-back');
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
    return stuckAfterSwap(B, cause.type ?? 'rejected', `the broker rejected a request ${whileDoing()}: ${cause.message}`);
  }
}

/** A step that did not finish, as one code and message: its refusal, or the interrupt that ended it. */
function whyEnded(end: { ok: false; interrupt: Interrupt } | { ok: false; refusal: Refusal }): { code: string; message: string } {
  return 'refusal' in end ? end.refusal : { code: end.interrupt, message: end.interrupt };
}
