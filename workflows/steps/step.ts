/**
 * The note's steps, one object each, in the spirit of PD's operator steps (pkg/schedule/operator/step.go):
 * a step knows when it is finished (from what the Watch knows of the broker), which refusals pass by
 * themselves (tried again after retryMs) and which end it, what interrupts it, and the blocking reason it
 * reports in words. `runStep` runs any of them; compositions (one file per operation) decide what an
 * interrupt or a final refusal means for their operation. This file holds what every step shares; the steps are
 * in files named by the writes they send: learner.ts (step 0, the promotion, the drop), swap.ts (step 1 and the
 * swap back), remove-leaving.ts (step 2), owner.ts (the owner handoff's).
 *
 * Time decisions replay identically (patch `decide-on-timers`, DECIDE_ON_TIMERS in patches.ts). Every deadline,
 * bound and stall decision (the stall abort, the catch-up deadline, the swap-back deadline, the quiet-point
 * bound, admission closed too long) reads state that a workflow timer, or `condition(fn, timeout)`, sets when it
 * fires; none compares the workflow clock after a read. Progress is stamped with the broker's clock from the data
 * (a read's `now`, an event's `at`), never with the time the workflow received it. A read whose result decides a
 * branch is a normal activity. Why: when a query completes the workflow task a local activity ran in, sdk-core
 * hands the result to the workflow only with the next task, at that task's later time and beside its events,
 * while replay hands it over in the first task; a clock comparison or a check of state those events change, made
 * right after such a read, can then take another branch on replay ("No command scheduled for event
 * TimerStarted"). `Date.now()` and `new Date()` appear in workflow code only for data (a search attribute, a
 * status field, a log line) and in legacy-clock.ts, for executions from before the patch: the allow-list in
 * test/unit/workflow-clock.test.ts names each use.
 */
import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow';
import type { WriteOutcome } from '../../activities';
import type { GuardedWriteName, Refusal, WriteAccepted } from '../../cluster/contract';
import type { MovePhase } from '../../rules/definitions';
import type { Operation } from './operation';
import type { Interrupt } from './watch';

/** A step that waits until the broker reaches a state (nothing is written). */
export interface WaitStep {
  phase: MovePhase;
  done: () => boolean;
  interrupts: () => Interrupt | null;
  describe: () => string;
}

/** A step that sends one guarded write. */
export interface WriteStep<T> {
  phase: MovePhase;
  write: GuardedWriteName;
  body: () => Record<string, unknown>;
  /** The activity's summary in the Temporal UI: a sentence. */
  summary: string;
  /** Finished already by what the workflow knows (an earlier attempt took effect): its value, and no write. */
  finished?: () => { value: T } | null;
  /** Waited for before every try: what the broker will check, so the write is not sent to be refused. */
  before?: WaitStep;
  accepted: (reply: WriteAccepted & WriteOutcome) => T;
  /** Refusals that pass by themselves: tried again after retryMs (or at once when an interrupt comes). */
  passing: (r: Refusal) => boolean;
  /** Side effects of a passing refusal before the next try (re-read what the broker's word corrects). */
  onPassing?: (r: Refusal) => Promise<void> | void;
  interrupts: () => Interrupt | null;
  /** Words while trying again after a passing refusal. */
  retrying?: (r: Refusal) => string;
  /** Read the partition's progress right after an accepted write (folds a read into the write's reply). */
  readProgress?: boolean;
  /** The next step's write, sent by the same activity right after this one is accepted (see guardedWrite). */
  then?: { write: GuardedWriteName; body: Record<string, unknown> };
}

export type Step<T = void> = WaitStep | WriteStep<T>;

/** How a step ended: finished with its value, interrupted, or refused for a reason that does not pass. */
export type StepEnd<T> = { ok: true; value: T } | { ok: false; interrupt: Interrupt } | { ok: false; refusal: Refusal };

function isWrite<T>(step: Step<T>): step is WriteStep<T> {
  return 'write' in step;
}

async function runWait(op: Operation, step: WaitStep): Promise<StepEnd<void>> {
  op.setPhase(step.phase);
  const interrupt = await op.watch.waitFor(step.done, step.interrupts, step.describe);
  return interrupt === null ? { ok: true, value: undefined } : { ok: false, interrupt };
}

/** Run one step to its end. */
export async function runStep<T>(op: Operation, step: WriteStep<T>): Promise<StepEnd<T>>;
export async function runStep(op: Operation, step: WaitStep): Promise<StepEnd<void>>;
export async function runStep<T>(op: Operation, step: Step<T>): Promise<StepEnd<T | void>> {
  if (!isWrite(step)) return runWait(op, step);
  for (;;) {
    const already = step.finished?.();
    if (already) return { ok: true, value: already.value };
    if (step.before) {
      const ready = await runWait(op, step.before);
      if (!ready.ok) return ready;
    }
    op.setPhase(step.phase);
    const interrupt = step.interrupts();
    if (interrupt) return { ok: false, interrupt };
    const reply = await op.watch.write(step.write, step.body(), step.summary, { readProgress: step.readProgress, then: step.then });
    if (reply.ok) return { ok: true, value: step.accepted(reply) };
    const r = reply.refusal;
    if (!step.passing(r)) return { ok: false, refusal: r };
    await step.onPassing?.(r);
    // A refusal an interrupt explains (a pending recovery, T down) ends the step at once.
    if (step.interrupts()) continue;
    op.retried(step.retrying?.(r) ?? `retrying ${step.write}: ${r.message}`);
    await op.watch.pause(() => step.interrupts() !== null);
  }
}

/**
 * An activity the broker rejected for good (a 4xx that is not a typed refusal): retrying cannot help. A local
 * activity's failure reaches the workflow as the ApplicationFailure itself.
 */
export function rejection(err: unknown): ApplicationFailure | null {
  if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) return err.cause;
  return err instanceof ApplicationFailure ? err : null;
}

export const codes = (...list: string[]) => {
  const set = new Set(list);
  return (r: Refusal) => set.has(r.code);
};

/** Refusals every write may meet and that pass: a generation race, an injected fault, a recovery (an interrupt decides). */
export const COMMON_PASSING = ['generation_mismatch', 'injected', 'pending_recovery'];

export const noInterrupts = (): Interrupt | null => null;

/** Wait out a pending recovery: the partition takes no guarded write until it activates. */
export function waitForActivation(op: Operation): WaitStep {
  const w = op.watch;
  return {
    phase: 'waiting_for_recovery',
    done: () => !w.recoveryPending,
    interrupts: noInterrupts,
    describe: () => `pending recovery on ${w.partitionId}: the partition takes no guarded write until it activates (epoch ${w.epoch} -> ${w.epoch + 1})`,
  };
}
