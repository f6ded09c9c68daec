/**
 * The note's steps, one object each, in the spirit of PD's operator steps (pkg/schedule/operator/step.go):
 * a step knows when it is finished (from what the Watch knows of the broker), which refusals pass by
 * themselves (tried again after retryMs) and which end it, what interrupts it, and the blocking reason it
 * reports in words. `runStep` runs any of them; compositions (one file per operation) decide what an
 * interrupt or a final refusal means for their operation.
 *
 * Time decisions replay identically (patch `decide-on-timers`, DECIDE_ON_TIMERS in watch.ts). Every deadline,
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
import { ActivityFailure, ApplicationFailure, condition } from '@temporalio/workflow';
import type { Rejected, WriteOutcome } from '../../activities';
import type { GuardedWriteName, Refusal, WriteAccepted, WriteReply } from '../../cluster/contract';
import type { MovePhase, QuietPoint } from '../definitions';
import { formatBytes } from '../format';
import type { Operation } from './operation';
import { legacyNow } from './legacy-clock';
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

const codes = (...list: string[]) => {
  const set = new Set(list);
  return (r: Refusal) => set.has(r.code);
};

/** Refusals every write may meet and that pass: a generation race, an injected fault, a recovery (an interrupt decides). */
const COMMON_PASSING = ['generation_mismatch', 'injected', 'pending_recovery'];

const noInterrupts = (): Interrupt | null => null;

/**
 * What ends a learner's attempt before it counts: a recovery, an operator's cancel, the learner failing,
 * stalling, or missing its catch-up deadline (proportional to the bytes it copies).
 */
export function learnerInterrupts(op: Operation, learner: string): () => Interrupt | null {
  const w = op.watch;
  return () => {
    if (w.recoveryPending) return 'recovery';
    if (op.cancelReason !== null) return 'cancel';
    if (!w.live(learner)) return 'node_down';
    // Stall and deadline run from the add-learner write on.
    if (w.stalledTooLong(learner)) return 'stalled';
    if (w.pastCatchUpDeadline(learner)) return 'deadline';
    return null;
  };
}

/** Step 0: add `node` as a learner (reused when it already is one, e.g. after a recovery). */
export function addLearner(op: Operation, node: string, interrupts: () => Interrupt | null): WriteStep<void> {
  const w = op.watch;
  return {
    phase: 'adding_learner',
    write: 'add-learner',
    body: () => ({ node }),
    summary: `Add ${node} as a learner of ${w.partitionId}`,
    finished: () => {
      if (!w.partition?.learners.includes(node)) return null;
      w.trackTransfer(node);
      return { value: undefined };
    },
    accepted: (reply) => {
      w.learnerAdded(node, reply.partition.generation);
      w.trackTransfer(node);
    },
    passing: codes(...COMMON_PASSING, 'no_sync_budget', 'not_caught_up', 'admission_closed'),
    interrupts,
    retrying: (r) =>
      r.code === 'no_sync_budget'
        ? `waiting for sync budget on node ${String(r.saw['node'] ?? node)}: ${String(r.saw['inUse'] ?? '?')} of ${String(r.saw['limit'] ?? '?')} transfers in use` +
          (typeof r.saw['clusterInUse'] === 'number' ? ` (cluster: ${String(r.saw['clusterInUse'])} of ${String(r.saw['clusterLimit'])})` : '')
        : `retrying add-learner: ${r.message}`,
  };
}

/** The learner catches up in the background and the broker admits it to the accepted history. */
export function waitForAdmission(op: Operation, node: string, interrupts: () => Interrupt | null): WaitStep {
  const w = op.watch;
  return {
    phase: 'catching_up',
    done: () => w.admitted(node),
    interrupts,
    describe: () => {
      const t = w.transfer(node);
      const left = formatBytes(w.replica(node).bytesRemaining);
      const stalled = w.stalledFor(node);
      if (t?.watch.paused) {
        return `transfer to ${node} paused: recovery transfers on ${node} come first (${left} remaining; paused time counts toward neither the stall nor the catch-up limit)`;
      }
      if (stalled >= w.timing.stallReportMs || t?.watch.stalledAtBroker) {
        return `${node} is stalled: no progress for ${Math.round(stalled / 1000)}s, ${left} remaining (aborts after ${Math.round(w.timing.stallAbortMs / 1000)}s)`;
      }
      return `waiting for ${node} to catch up: ${left} remaining, durable at ${Math.max(0, w.durable(node))}`;
    },
  };
}

/**
 * Step 1: `learner` counts from here, `leaving` stops counting and stays eligible; returns boundary B. The
 * progress read folded into the reply tells at once whether the learner already covers B.
 */
export function swap(op: Operation, learner: string, leaving: string, interrupts: () => Interrupt | null): WriteStep<number> {
  const w = op.watch;
  return {
    phase: 'swapping',
    write: 'swap',
    body: () => ({ learner, leaving }),
    summary: `Swap who counts on ${w.partitionId}: ${learner} counts, ${leaving} leaves`,
    accepted: (reply) => {
      const boundary = reply.boundary ?? reply.partition.boundary?.offset ?? w.confirmedTail ?? 0;
      op.status.boundary = boundary;
      return boundary;
    },
    passing: codes(...COMMON_PASSING, 'no_sync_budget', 'not_caught_up', 'not_admitted', 'change_in_flight', 'admission_closed'),
    interrupts,
    retrying: (r) => `retrying the swap: ${r.message}`,
    readProgress: true,
  };
}

/**
 * The swap back (README, "Returning replica"): the leaving R counts again and `joined`, the T that joined in
 * its place, is leaving; returns B', the confirmed tail then. R down, behind or rejoining passes (the broker
 * checks R as it checks any joining replica); T no longer the one that joined in R's place ends it.
 */
export function swapBack(op: Operation, leaving: string, joined: string): WriteStep<number> {
  const w = op.watch;
  const step = swap(op, leaving, joined, noInterrupts);
  return {
    ...step,
    summary: `Swap back on ${w.partitionId}: ${leaving} counts again, ${joined} leaves`,
    // Taken already (a reply lost, then a re-read): B' is the recorded boundary.
    finished: () => {
      const b = w.partition?.boundary;
      if (!b || b.joined !== leaving || b.leaving !== joined) return null;
      op.status.boundary = b.offset;
      return { value: b.offset };
    },
    passing: codes(...COMMON_PASSING, 'not_caught_up', 'not_admitted', 'node_down', 'admission_closed'),
    retrying: (r) => `retrying the swap back: ${r.message}`,
  };
}

/** T down this long after the swap: the follower move swaps back (MoveTiming.swapBackAfterMs). */
export const SWAP_BACK_AFTER_MS = 10 * 60_000;

/**
 * What ends the wait for T past the swap, for the swap back: an operator's cancel (accepted only while T is
 * down), or T down for swapBackAfterMs in a row ('deadline'): a timer started when the wait first sees T down
 * ends that stretch down unless T came back meanwhile. T returning resets the clock.
 */
export function targetLostInterrupts(op: Operation, target: string): () => Interrupt | null {
  const w = op.watch;
  const after = w.timing.swapBackAfterMs ?? SWAP_BACK_AFTER_MS;
  /** Since when T is down: the workflow clock before patch decide-on-timers, the stretch's number after it. */
  let downSince: number | null = null;
  let stretches = 0;
  let expired = false;
  return () => {
    if (op.cancelReason !== null) return 'cancel';
    if (w.live(target)) {
      downSince = null;
      expired = false;
      return null;
    }
    if (!w.onTimers) {
      downSince ??= legacyNow();
      return legacyNow() - downSince >= after ? 'deadline' : null;
    }
    if (downSince === null) {
      const stretch = (downSince = ++stretches);
      w.after(after, () => {
        if (downSince === stretch) expired = true;
      });
    }
    return expired ? 'deadline' : null;
  };
}

/** What the swap did: boundary B, and what became of the removal chained to it. */
export interface Swapped {
  boundary: number;
  removal: WriteReply | { rejected: Rejected } | null;
}

/**
 * Step 1 with step 2 chained: the swap's activity then tries remove-leaving, which the broker accepts only
 * once the learner covers B and is live with no recovery pending; refused, it changes nothing and the removal
 * step (which finds R already gone when it was accepted) runs as usual.
 */
export function swapThenRemove(op: Operation, learner: string, leaving: string, interrupts: () => Interrupt | null): WriteStep<Swapped> {
  const step: Omit<WriteStep<number>, 'finished'> = swap(op, learner, leaving, interrupts);
  return {
    ...step,
    summary: `${step.summary}; then remove ${leaving} if ${learner} already covers the boundary`,
    then: { write: 'remove-leaving', body: { node: leaving } },
    accepted: (reply) => ({ boundary: step.accepted(reply), removal: reply.then ?? null }),
  };
}

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

/**
 * Wait until every one of `nodes` is live and durable at or beyond `boundary`, with no recovery pending.
 * `keeps` names the copy that stays eligible meanwhile (the leaving follower), `since` the step that made
 * the wait necessary and `orElse` what happens if a node stays down, for the words.
 */
export function waitDurable(
  op: Operation,
  nodes: string[],
  boundary: number,
  words: { keeps?: string; since?: string; phase?: MovePhase; orElse?: string } = {},
  interrupts: () => Interrupt | null = noInterrupts,
): WaitStep {
  const w = op.watch;
  const kept = words.keeps ? `${words.keeps} stays eligible and keeps its data; ` : '';
  const since = words.since ? ` ${words.since}` : '';
  const orElse = words.orElse ?? 'for recovery';
  return {
    phase: words.phase ?? 'covering_boundary',
    done: () => !w.recoveryPending && nodes.every((n) => w.live(n) && w.durable(n) >= boundary),
    interrupts,
    describe: () => {
      if (w.recoveryPending) return `pending recovery on ${w.partitionId}: ${kept}waiting for activation`;
      const down = nodes.filter((n) => !w.live(n)).join(', ');
      if (down) return `${down} is down${since}: ${kept}waiting for ${down} to return or ${orElse}`;
      const behind = nodes.filter((n) => w.durable(n) < boundary);
      return `waiting for ${behind.join(', ')} durable at ${boundary}: at ${behind.map((n) => Math.max(0, w.durable(n))).join(', ')}`;
    },
  };
}

/**
 * Step 2: remove `node` (leaving) once `target` covers B; it keeps its data as a retained copy for the grace
 * period. Passing refusals (see classifyRemovalRefusal) wait for the boundary again; `not_leaving` and final
 * ones end the step for the composition to judge. `lost` (targetLostInterrupts) lets the wait end for a swap
 * back, with the words saying when; without it nothing interrupts the step.
 */
export function removeLeaving(
  op: Operation,
  node: string,
  target: string,
  boundary: number,
  classify: (r: Refusal) => 'passing' | 'target_down' | 'not_leaving' | 'final',
  lost?: () => Interrupt | null,
): WriteStep<void> {
  const w = op.watch;
  const interrupts = lost ?? noInterrupts;
  const after = `${Math.round((w.timing.swapBackAfterMs ?? SWAP_BACK_AFTER_MS) / 1000)}s`;
  const orElse = lost ? `for the swap back after ${after} down (a cancel swaps back at once)` : undefined;
  return {
    phase: 'removing',
    write: 'remove-leaving',
    body: () => ({ node }),
    summary: `Remove ${node} from ${w.partitionId}: ${target} covers boundary ${boundary}`,
    // Already removed, by the removal chained to the swap.
    finished: () => {
      const p = w.partition;
      return p && p.leaving !== node && !p.history.some((h) => h.node === node) && p.followers.includes(target) ? { value: undefined } : null;
    },
    before: waitDurable(op, [target], boundary, { keeps: node, since: 'after the swap', ...(orElse ? { orElse } : {}) }, interrupts),
    accepted: () => undefined,
    passing: (r) => ['passing', 'target_down'].includes(classify(r)),
    onPassing: async (r) => {
      if (classify(r) === 'target_down') w.replica(target).live = false;
      // The broker's word on T's durable offset wins over what signals said (a lost disk can lower it).
      if (r.code === 'boundary_not_covered') await w.rereadDurable(target);
    },
    interrupts,
    retrying: (r) => `retrying the removal of ${node}: ${r.message}`,
  };
}

/** Drop the learner `node` (cleanup before anything counted changed); waits out a recovery first. */
export function dropLearner(op: Operation, node: string): WriteStep<void> {
  const w = op.watch;
  return {
    phase: 'cleaning_up',
    write: 'drop-learner',
    body: () => ({ node }),
    summary: `Drop learner ${node} from ${w.partitionId}`,
    before: waitForActivation(op),
    accepted: () => undefined,
    passing: codes(...COMMON_PASSING, 'no_sync_budget', 'not_caught_up', 'change_in_flight', 'admission_closed'),
    interrupts: noInterrupts,
    retrying: (r) => `dropping learner ${node}: ${r.message}`,
  };
}

/**
 * Run dropLearner to its end, whatever happens: says what became of the learner, for an outcome's reason. A
 * learner that is already gone counts as dropped.
 */
export async function dropLearnerAndSay(op: Operation, node: string): Promise<string> {
  const notDropped = (why: string) => `the learner ${node} could not be dropped (${why}): drop it with the guarded write drop-learner`;
  try {
    const end = await runStep(op, dropLearner(op, node));
    if (end.ok || ('refusal' in end && end.refusal.code === 'not_a_learner')) return 'the learner was dropped';
    return notDropped('refusal' in end ? end.refusal.message : end.interrupt);
  } catch (err) {
    const cause = rejection(err);
    if (!cause) throw err;
    return notDropped(cause.message);
  }
}

/** Replication-factor increase: promote the admitted learner to follower (W follows the new factor). */
export function promoteLearner(op: Operation, node: string, interrupts: () => Interrupt | null): WriteStep<void> {
  const w = op.watch;
  return {
    phase: 'promoting',
    write: 'promote-learner',
    body: () => ({ node }),
    summary: `Promote learner ${node} to follower of ${w.partitionId}`,
    accepted: () => undefined,
    passing: codes(...COMMON_PASSING, 'not_caught_up', 'not_admitted', 'change_in_flight', 'admission_closed'),
    interrupts,
    retrying: (r) => `retrying the promotion of ${node}: ${r.message}`,
  };
}

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
    const inFlight = view.progress.tail - view.progress.confirmedTail;
    if (inFlight <= quiet.maxInFlight) return { ok: true, value: 'quiet' };
    if (reached) return { ok: true, value: 'bound' };
    op.block(`waiting for a quiet point on ${w.partitionId}: ${inFlight} messages in flight (at most ${quiet.maxInFlight}); ${bound}`);
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
    const inFlight = view.progress.tail - view.progress.confirmedTail;
    if (inFlight <= quiet.maxInFlight) return { ok: true, value: 'quiet' };
    const left = since + quiet.maxWaitMs - legacyNow();
    if (left <= 0) return { ok: true, value: 'bound' };
    op.block(`waiting for a quiet point on ${w.partitionId}: ${inFlight} messages in flight (at most ${quiet.maxInFlight}); ${bound}`);
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
    accepted: (reply) => {
      const finalBoundary = reply.boundary ?? w.confirmedTail ?? 0;
      w.finalBoundary = finalBoundary;
      return finalBoundary;
    },
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
