/**
 * A new copy on T until it counts, for every operation that adds one (follower move, replication-factor
 * increase, lost-follower replacement): step 0 (add T as a learner, wait for admission), then the write that
 * makes T count (swap or promote-learner), tried again under the new epoch after a recovery. Every exit before
 * that write is accepted drops the learner; nothing counted changed. And past a swap, the removal of the copy T
 * stands in for (step 2), with the swap back's way out when the operation has one.
 */
import type { MoveContext } from '../../activities';
import type { Refusal } from '../../cluster/contract';
import type { MoveOrigin, MoveOutcome } from '../../rules/definitions';
import type { MoveCheck } from '../../rules/follower-move-rules';
import { classifyRemovalRefusal } from '../../rules/follower-move-rules';
import { formatBytes } from '../../rules/format';
import type { Operation } from './operation';
import { addLearner, dropLearnerAndSay, learnerInterrupts, waitForAdmission } from './learner';
import { removeLeaving } from './remove-leaving';
import { rejection, runStep, waitForActivation, type WriteStep } from './step';
import type { Interrupt } from './watch';

export interface NewCopy<T> {
  op: Operation;
  /** T: the node that receives the new copy. */
  to: string;
  origin: MoveOrigin;
  /** The write that makes T count, ended by the learner's interrupts. */
  count: (interrupts: () => Interrupt | null) => WriteStep<T>;
  /** That write in the words of an outcome ("the swap", "the promotion"): exits happen before it. */
  counting: string;
  /** The operation's rules: checked first (validating), and again after a recovery with T's own learner left out. */
  check: (ctx: MoveContext) => MoveCheck;
}

export type Ended = { ended: MoveOutcome };

export function aborted(partition: string, code: string, reason: string): Ended {
  return { ended: { status: 'aborted', partition, code, reason } };
}

/** Validating: the operation's rules against what the broker says now; how it ended when they refuse, else null. */
async function validate(op: Operation, check: (ctx: MoveContext) => MoveCheck): Promise<Ended | null> {
  const partition = op.subject.partition;
  let ctx;
  try {
    ctx = await op.watch.read();
  } catch (err) {
    const cause = rejection(err);
    if (cause) return aborted(partition, cause.type ?? 'rejected', cause.message);
    throw err;
  }
  const result = check(ctx);
  return result.ok ? null : aborted(partition, result.code, result.message);
}

/**
 * Validating, then step 0 on T and the write that makes it count: its value, or how the operation ended (refused
 * before anything was written, or with the learner dropped).
 */
export async function untilCounted<T>(n: NewCopy<T>): Promise<{ value: T } | Ended> {
  const refused = await validate(n.op, n.check);
  if (refused) return refused;
  try {
    return await attempts(n);
  } catch (err) {
    // A request the broker rejects for good ends the operation, and the learner goes too.
    const cause = rejection(err);
    // Past an accepted swap T counts: the learner is no longer the operation's to drop.
    if (!cause || n.op.boundary !== null) throw err;
    return withoutLearner(n, cause.type ?? 'rejected', `the broker rejected a request while ${n.op.phase.replace(/_/g, ' ')}: ${cause.message}`);
  }
}

async function withoutLearner<T>(n: NewCopy<T>, code: string, why: string): Promise<Ended> {
  return aborted(n.op.subject.partition, code, `${why}; ${await dropLearnerAndSay(n.op, n.to)} before ${n.counting}`);
}

async function cancelled<T>(n: NewCopy<T>, drop: boolean): Promise<Ended> {
  if (drop) await dropLearnerAndSay(n.op, n.to);
  return { ended: { status: 'cancelled', partition: n.op.subject.partition, reason: n.op.cancelReason ?? 'cancelled' } };
}

async function attempts<T>(n: NewCopy<T>): Promise<{ value: T } | Ended> {
  const { op, to: T, origin } = n;
  const watch = op.watch;
  const partition = op.subject.partition;
  const learner = learnerInterrupts(op, T);
  // Adding T: only a recovery or a cancel interrupts (a refusal says the rest).
  const adding = (): Interrupt | null => (watch.recoveryPending ? 'recovery' : op.cancelReason !== null ? 'cancel' : null);
  for (;;) {
    // ---- step 0: add T as a learner (or reuse it after a recovery).
    const added = await runStep(op, addLearner(op, T, adding));
    if (!added.ok) {
      if ('refusal' in added) return aborted(partition, added.refusal.code, `${T} was not added: ${added.refusal.message}`);
      if (added.interrupt === 'cancel') return cancelled(n, false);
      if (origin === 'planner') return aborted(partition, 'pending_recovery', `a recovery opened on ${partition} before ${T} was added; the planner decides again after activation`);
      await runStep(op, waitForActivation(op));
      await watch.read();
      continue;
    }

    // ---- admission, then the write that makes T count.
    let interrupt: Interrupt;
    const admitted = await runStep(op, waitForAdmission(op, T, learner));
    if (admitted.ok) {
      const counted = await runStep(op, n.count(learner));
      if (counted.ok) return { value: counted.value };
      if ('refusal' in counted) {
        // The broker's word that T is down: a failed copy never starts to count.
        if (counted.refusal.code !== 'node_down') return withoutLearner(n, counted.refusal.code, `${n.counting} was refused: ${counted.refusal.message}`);
        interrupt = 'node_down';
      } else interrupt = counted.interrupt;
    } else if ('interrupt' in admitted) interrupt = admitted.interrupt;
    else return withoutLearner(n, 'rejected', 'admission ended without an interrupt');

    const transfer = watch.transfer(T);
    switch (interrupt) {
      case 'cancel':
        return cancelled(n, true);
      case 'node_down':
        return withoutLearner(n, 'target_down', `${T} failed before ${n.counting}; nothing counted changed`);
      case 'stalled':
        return withoutLearner(n, 'stalled', `${T} made no progress for ${Math.round(watch.stalledFor(T) / 1000)}s`);
      case 'deadline':
        return withoutLearner(n, 'catch_up_timeout', `${T} did not catch up within the time allowed for ${formatBytes(transfer?.bytesToCopy ?? 0)}`);
      case 'recovery':
        break;
    }
    // A recovery cancels the attempt: an operator's operation waits for activation and tries again under the
    // new epoch, reusing T if it is still a learner; a planner's ends.
    await runStep(op, waitForActivation(op));
    if (op.cancelReason !== null) return cancelled(n, true);
    if (origin === 'planner') return withoutLearner(n, 'pending_recovery', `a recovery on ${partition} cancelled the ${op.subject.kind.replace('-', ' ')} before ${n.counting}`);
    op.retried(`the recovery on ${partition} activated at epoch ${watch.epoch}: trying again`);
    const ctx = await watch.read();
    const p = ctx.view.partition;
    const again = n.check({ ...ctx, view: { ...ctx.view, partition: { ...p, learners: p.learners.filter((x) => x !== T) } } });
    if (!again.ok) return withoutLearner(n, again.code, `after the recovery the ${op.subject.kind.replace('-', ' ')} no longer applies: ${again.message}`);
  }
}

/**
 * After the swap, what ends the wait for T for good: T lost (targetLostInterrupts), and how the operation then
 * ends (the follower move's swap back).
 */
export interface WhenLost {
  interrupts: () => Interrupt | null;
  then: (why: Interrupt) => Promise<MoveOutcome>;
}

/** Past the swap at B, nothing is lost: what holds, and what the operator can do once the broker's cause is fixed. */
export function stuckAfterSwap(op: Operation, leaving: string, T: string, B: number, code: string, why: string): MoveOutcome {
  return {
    status: 'aborted',
    partition: op.subject.partition,
    code,
    reason:
      `${why}. ${T} counts since the swap at boundary ${B}; ${leaving} stays leaving, eligible and keeps its data, so ` +
      `nothing is lost. Fix what the broker names, then remove ${leaving} with the guarded write remove-leaving.`,
  };
}

/**
 * Step 2 past a swap: remove `leaving` once T covers B (it keeps its data as a retained copy). Refusals that
 * pass wait; one that cannot pass by itself ends the operation with its reason, `leaving` still eligible.
 * `lost`, when given, ends the wait once T is lost and says how the operation ends.
 */
export async function removeOnceCovered(op: Operation, leaving: string, T: string, B: number, lost?: WhenLost): Promise<MoveOutcome> {
  for (;;) {
    let removed;
    try {
      removed = await runStep(op, removeLeaving(op, leaving, T, B, (r) => classifyRemovalRefusal(r, T), lost?.interrupts));
    } catch (err) {
      const cause = rejection(err);
      if (!cause) throw err;
      return stuckAfterSwap(op, leaving, T, B, cause.type ?? 'rejected', `the broker rejected the removal of ${leaving}: ${cause.message}`);
    }
    if (removed.ok) return removedAt(op, leaving, T, B);
    if (!('refusal' in removed)) {
      if (lost) return lost.then(removed.interrupt);
      continue;
    }
    return refusedRemoval(op, leaving, T, B, removed.refusal);
  }
}

/** A refusal of step 2 that does not pass by itself: `leaving` may already be gone; otherwise the operation is stuck. */
export async function refusedRemoval(op: Operation, leaving: string, T: string, B: number, r: Refusal): Promise<MoveOutcome> {
  if (r.code !== 'not_leaving') return stuckAfterSwap(op, leaving, T, B, r.code, `the broker refused to remove ${leaving} for a reason that does not pass by itself: ${r.message}`);
  // Not leaving any more: an earlier try took effect (a lost reply), or something else changed the partition.
  const p = (await op.watch.read()).view.partition;
  if (p.leaving === null && !p.history.some((h) => h.node === leaving) && [p.owner, ...p.followers].includes(T)) return removedAt(op, leaving, T, B);
  return { status: 'aborted', partition: op.subject.partition, code: 'not_leaving', reason: `${leaving} is no longer leaving ${op.subject.partition}: ${r.message}` };
}

function removedAt(op: Operation, leaving: string, T: string, B: number): MoveOutcome {
  return { status: 'completed', partition: op.subject.partition, from: leaving, to: T, boundary: B, epoch: op.watch.epoch };
}
