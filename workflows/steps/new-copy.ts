/**
 * A new copy on T until it counts, for the operations that add one without moving a live follower away
 * (replication-factor increase, lost-follower replacement): step 0 (add T as a learner, wait for admission),
 * then the write that makes T count (promote-learner or swap), tried again under the new epoch after a
 * recovery. Every exit before that write is accepted drops the learner; nothing counted changed.
 * And past a swap, the removal of the copy T stands in for (step 2).
 */
import type { MoveContext } from '../../activities';
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
  /** The operation's rules, checked again after a recovery with T's own learner left out. */
  recheck: (ctx: MoveContext) => MoveCheck;
}

export type Ended = { ended: MoveOutcome };

export function aborted(partition: string, code: string, reason: string): Ended {
  return { ended: { status: 'aborted', partition, code, reason } };
}

/** Validating: the operation's rules against what the broker says now; how it ended when they refuse, else null. */
export async function validate(op: Operation, check: (ctx: MoveContext) => MoveCheck): Promise<Ended | null> {
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

/** Step 0 on T, then the write that makes it count: its value, or how the operation ended (learner dropped). */
export async function untilCounted<T>(n: NewCopy<T>): Promise<{ value: T } | Ended> {
  try {
    return await attempts(n);
  } catch (err) {
    // A request the broker rejects for good ends the operation, and the learner goes too.
    const cause = rejection(err);
    if (!cause) throw err;
    return withoutLearner(n, cause.type ?? 'rejected', `the broker rejected a request while ${n.op.status.phase.replace(/_/g, ' ')}: ${cause.message}`);
  }
}

async function withoutLearner<T>(n: NewCopy<T>, code: string, why: string): Promise<Ended> {
  return aborted(n.op.subject.partition, code, `${why}; ${await dropLearnerAndSay(n.op, n.to)} before ${n.to} counted`);
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
        if (counted.refusal.code !== 'node_down') return withoutLearner(n, counted.refusal.code, `${counted.refusal.message}`);
        interrupt = 'node_down';
      } else interrupt = counted.interrupt;
    } else if ('interrupt' in admitted) interrupt = admitted.interrupt;
    else return withoutLearner(n, 'rejected', 'admission ended without an interrupt');

    const transfer = watch.transfer(T);
    switch (interrupt) {
      case 'cancel':
        return cancelled(n, true);
      case 'node_down':
        return withoutLearner(n, 'target_down', `${T} failed before it counted; nothing counted changed`);
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
    if (origin === 'planner') return withoutLearner(n, 'pending_recovery', `a recovery on ${partition} cancelled the attempt`);
    op.status.retries++;
    const ctx = await watch.read();
    const p = ctx.view.partition;
    const again = n.recheck({ ...ctx, view: { ...ctx.view, partition: { ...p, learners: p.learners.filter((x) => x !== T) } } });
    if (!again.ok) return withoutLearner(n, again.code, `after the recovery the ${op.subject.kind} no longer applies: ${again.message}`);
  }
}

/**
 * Step 2 past a swap: remove `leaving` once T covers B (it keeps its data as a retained copy). Refusals that
 * pass wait; one that cannot pass by itself ends the operation with its reason, `leaving` still eligible.
 */
export async function removeOnceCovered(op: Operation, leaving: string, T: string, B: number): Promise<MoveOutcome> {
  const partition = op.subject.partition;
  const completed: MoveOutcome = { status: 'completed', partition, from: leaving, to: T, boundary: B, epoch: 0 };
  const stuck = (r: { code: string; message: string }, why: string): MoveOutcome => ({
    status: 'aborted',
    partition,
    code: r.code,
    reason:
      `${why}: ${r.message}. ${T} counts since the swap at boundary ${B}; ${leaving} stays leaving and eligible, so nothing is ` +
      `lost. Fix what the broker names, then remove ${leaving} with the guarded write remove-leaving.`,
  });
  for (;;) {
    let removed;
    try {
      removed = await runStep(op, removeLeaving(op, leaving, T, B, (r) => classifyRemovalRefusal(r, T)));
    } catch (err) {
      const cause = rejection(err);
      if (!cause) throw err;
      return stuck({ code: cause.type ?? 'rejected', message: cause.message }, 'the broker rejected the removal');
    }
    if (removed.ok) return { ...completed, epoch: op.watch.epoch };
    if (!('refusal' in removed)) continue;
    if (removed.refusal.code !== 'not_leaving') return stuck(removed.refusal, `the broker refused to remove ${leaving} for a reason that does not pass by itself`);
    // Not leaving any more: an earlier try took effect (a lost reply), or something else changed the partition.
    const p = (await op.watch.read()).view.partition;
    if (p.leaving === null && !p.history.some((h) => h.node === leaving) && [p.owner, ...p.followers].includes(T)) return { ...completed, epoch: op.watch.epoch };
    return { status: 'aborted', partition, code: 'not_leaving', reason: `${leaving} is no longer leaving ${partition}: ${removed.refusal.message}` };
  }
}
