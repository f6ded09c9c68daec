/** The owner handoff's steps: wait for a quiet point, close admission, commit the new owner, reopen admission. */
import { condition } from '@temporalio/workflow';
import type { QuietPoint } from '../../rules/definitions';
import type { Operation } from './operation';
import { legacyNow } from './legacy-clock';
import { codes, COMMON_PASSING, noInterrupts, type StepEnd, type WriteStep } from './step';
import type { Interrupt } from './watch';

/**
 * Wait for a quiet point: at most `maxInFlight` messages published but not yet confirmed, or `maxWaitMs` spent
 * (then admission closes anyway). The tail comes only from reads, so this step reads every retryMs.
 */
export async function waitForQuietPoint(op: Operation, quiet: QuietPoint, interrupts: () => Interrupt | null): Promise<StepEnd<'quiet' | 'bound'>> {
  const w = op.watch;
  op.setPhase('waiting_for_quiet_point');
  const bound = `closing anyway after ${Math.round(quiet.maxWaitMs / 1000)}s`;
  if (!w.onTimers) return legacyQuietPoint(op, quiet, interrupts, bound);
  // The bound is a timer started with the step: its firing, not the clock after a read, ends the wait.
  let reached = false;
  w.after(quiet.maxWaitMs, () => (reached = true));
  for (;;) {
    const why = interrupts();
    if (why) return { ok: false, interrupt: why };
    const { view } = await w.read();
    const unconfirmed = view.progress.tail - view.progress.confirmedTail;
    if (unconfirmed <= quiet.maxInFlight) return { ok: true, value: 'quiet' };
    if (reached) return { ok: true, value: 'bound' };
    op.block(`waiting for a quiet point on ${w.partitionId}: ${unconfirmed} messages in flight (at most ${quiet.maxInFlight}); ${bound}`);
    await condition(() => reached || interrupts() !== null, w.timing.retryMs);
  }
}

/** The quiet point of executions from before patch decide-on-timers: the bound on the clock, read after each read. */
async function legacyQuietPoint(op: Operation, quiet: QuietPoint, interrupts: () => Interrupt | null, bound: string): Promise<StepEnd<'quiet' | 'bound'>> {
  const w = op.watch;
  const since = legacyNow();
  for (;;) {
    const why = interrupts();
    if (why) return { ok: false, interrupt: why };
    const { view } = await w.read();
    const unconfirmed = view.progress.tail - view.progress.confirmedTail;
    if (unconfirmed <= quiet.maxInFlight) return { ok: true, value: 'quiet' };
    const left = since + quiet.maxWaitMs - legacyNow();
    if (left <= 0) return { ok: true, value: 'bound' };
    op.block(`waiting for a quiet point on ${w.partitionId}: ${unconfirmed} messages in flight (at most ${quiet.maxInFlight}); ${bound}`);
    await condition(() => interrupts() !== null, Math.min(w.timing.retryMs, left));
  }
}

/** The owner stops accepting state-changing work and drains; returns the final boundary it reports. */
export function closeAdmission(op: Operation, interrupts: () => Interrupt | null): WriteStep<number> {
  const w = op.watch;
  return {
    phase: 'closing_admission',
    write: 'close-admission',
    body: () => ({}),
    summary: `Close admission on ${w.partitionId} and take its final boundary`,
    accepted: (reply) => reply.boundary ?? w.confirmedTail ?? 0,
    passing: codes(...COMMON_PASSING, 'change_in_flight'),
    interrupts,
    retrying: (r) => `retrying close-admission: ${r.message}`,
    readProgress: true,
  };
}

/** Commit `newOwner` at epoch + 1 with a continuation certificate for the final boundary. */
export function commitOwner(op: Operation, newOwner: string, finalBoundary: number, interrupts: () => Interrupt | null): WriteStep<void> {
  const w = op.watch;
  return {
    phase: 'committing_owner',
    write: 'commit-owner',
    body: () => ({ newOwner, certificate: { finalBoundary, epoch: w.epoch } }),
    summary: `Commit ${newOwner} as owner of ${w.partitionId} at epoch ${w.epoch + 1}, continuing from final boundary ${finalBoundary}`,
    accepted: () => undefined,
    passing: codes(...COMMON_PASSING, 'boundary_not_covered', 'change_in_flight'),
    interrupts,
    retrying: (r) => `retrying commit-owner: ${r.message}`,
  };
}

/** Reopen admission (on the new owner after a commit, on the old one after a failed handoff). Already open counts as done. */
export function reopenAdmission(op: Operation): WriteStep<void> {
  const w = op.watch;
  return {
    phase: 'reopening_admission',
    write: 'reopen-admission',
    body: () => ({}),
    summary: `Reopen admission on ${w.partitionId}`,
    finished: () => (w.partition?.admission === 'open' ? { value: undefined } : null),
    accepted: () => undefined,
    passing: codes(...COMMON_PASSING, 'change_in_flight'),
    interrupts: noInterrupts,
    retrying: (r) => `retrying reopen-admission: ${r.message}`,
  };
}
