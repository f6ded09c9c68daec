/**
 * Planned owner handoff from the owner A to D, an admitted, caught-up follower (the note's "The story: planned
 * owner handoff"): wait for a quiet point, close admission (the broker reports the final boundary), wait until
 * every counted copy is durable at it, commit D as owner at epoch + 1 with a continuation certificate, reopen
 * admission on D. A failure before the commit reopens admission on A and ends the handoff with its reason;
 * after the commit, failures are left to ordinary recovery and reported. A stays a follower; the replica count
 * and W never change. The time admission stays closed is measured on the workflow clock, from the close reply
 * to the reopen reply, shown in the status and kept in the outcome.
 */
import { patched, proxyActivities, proxyLocalActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { Refusal } from '../cluster/contract';
import type { HandoffRequest, MoveOutcome, OwnerMoveRequest, QuietPoint } from '../rules/definitions';
import { checkHandoff } from '../rules/handoff-rules';
import { begin, Operation } from './steps/operation';
import { closeAdmission, commitOwner, reopenAdmission, waitForQuietPoint } from './steps/owner';
import { rejection, runStep, waitForActivation } from './steps/step';
import { legacyNow } from './steps/legacy-clock';
import { ACTIVITY_OPTIONS, type Interrupt } from './steps/watch';

/** How often the broker is re-read while admission is closed and the handoff waits for the final boundary. */
const CLOSED_READ_MS = 200;
/** How long the first wait for the final boundary polls the broker from the worker (a local activity). */
const FIRST_WAIT_MS = 2_000;
/**
 * While admission is closed the broker is re-read when the wait's own timer fires, and by nothing else (the
 * watch's poll is off). Before this patch a read was due once the workflow clock passed a mark, and the watch's
 * poll read too. When a query completes the workflow task a read (a local activity) ran in, sdk-core records the
 * read's marker in that task but hands the result to the workflow with the next task, at its later time and
 * beside its events; replay hands it over in the first task. A read decided on the clock, or on whichever of two
 * timers fired beside the result, could then be made on one side only. Histories without the patch read as before.
 */
const READ_ON_TIMER = 'closed-read-on-timer';
// The wait that holds admission closed polls the broker in the worker, with no server round trip per try: a
// local activity before patch decide-on-timers, a normal one after it (its result decides a branch; steps/step.ts).
const { readWhenDurable: readWhenDurableLocally } = proxyLocalActivities<Activities>(ACTIVITY_OPTIONS);
const { readWhenDurable } = proxyActivities<Activities>(ACTIVITY_OPTIONS);

export const DEFAULT_QUIET_POINT: Required<QuietPoint> = { maxInFlight: 100, maxWaitMs: 30_000, maxClosedMs: 30_000 };

/**
 * When admission closed (workflow clock, for the status's admissionClosedMs; null while open), the final
 * boundary the owner reported, and whether the maxClosedMs timer started at the close has fired.
 */
interface Closed {
  at: number | null;
  finalBoundary: number | null;
  tooLong: boolean;
}

/**
 * The handoff from A to D as one composition of the steps, run inside an operation (an owner handoff, or the
 * second stage of an owner move). Returns its outcome; never throws for a refusal or an interrupt.
 */
export async function handOff(op: Operation, A: string, D: string, quietPoint: Partial<QuietPoint> | undefined): Promise<MoveOutcome> {
  const w = op.watch;
  const partition = w.partitionId;
  const quiet = { ...DEFAULT_QUIET_POINT, ...quietPoint };
  const closed: Closed = { at: null, finalBoundary: null, tooLong: false };
  /** What happened that the outcome should say beside its status (closing without a quiet point, a late cancel, ...). */
  const notes: string[] = [];
  const aborted = (code: string, reason: string): MoveOutcome => ({ status: 'aborted', partition, code, reason });

  const showClosed = (): number | null => {
    if (closed.at === null) return null;
    const admissionClosedMs = Date.now() - closed.at;
    op.show({ admissionClosedMs });
    return admissionClosedMs;
  };
  /** Before the commit: a recovery, a cancel, A or D failing; with admission closed also a stall past the bound. */
  const beforeCommit = (): Interrupt | null => {
    if (w.recoveryPending) return 'recovery';
    if (op.cancelReason !== null) return 'cancel';
    if (!w.live(A) || !w.live(D)) return 'node_down';
    if (closed.at !== null && (w.onTimers ? closed.tooLong : legacyNow() - closed.at >= quiet.maxClosedMs)) return 'stalled';
    return null;
  };

  /** The counted copies the commit needs at the final boundary: the owner and its live, admitted followers. */
  const counted = (): string[] => [A, ...(w.partition?.followers ?? []).filter((f) => w.live(f) && w.admitted(f))];
  /**
   * Wait until every counted copy is durable at the final boundary (progress signals), re-reading the broker
   * every CLOSED_READ_MS while admission is closed: publishes wait meanwhile, followers reach the final
   * boundary within a replication round or two, and only a read says a follower other than A or D went down.
   */
  const durableAtFinal = async (fb: number): Promise<Interrupt | null> => {
    op.setPhase('waiting_for_final_boundary');
    const onTimer = patched(READ_ON_TIMER);
    // Most handoffs end their wait here: the followers reach the final boundary within a replication round.
    const first = await (w.onTimers ? readWhenDurable : readWhenDurableLocally)(partition, fb, Math.min(quiet.maxClosedMs, FIRST_WAIT_MS));
    w.absorb(first.view, first.nodes);
    const every = Math.min(w.timing.pollMs, CLOSED_READ_MS);
    // Patched: the only read timer, armed after each read, so none is pending while a read runs.
    let readDue = false;
    let readAt = 0;
    const armRead = (): void => {
      if (!onTimer) readAt = legacyNow() + every;
      void sleep(every).then(() => {
        readDue = true;
        w.changed();
      });
    };
    armRead();
    for (;;) {
      const end = await w.waitFor(
        () => counted().every((n) => w.durable(n) >= fb),
        () => beforeCommit() ?? ((onTimer ? readDue : legacyNow() >= readAt) ? 'read' : null),
        () => {
          const behind = counted().filter((n) => w.durable(n) < fb);
          const ms = showClosed() ?? 0;
          return `admission closed for ${(ms / 1000).toFixed(1)}s: waiting for ${behind.join(', ')} durable at the final boundary ${fb} (at ${behind
            .map((n) => Math.max(0, w.durable(n)))
            .join(', ')}); reopens on ${A} after ${Math.round(quiet.maxClosedMs / 1000)}s`;
        },
        !onTimer,
      );
      if (end !== 'read') return end;
      readDue = false;
      await w.read();
      armRead();
    }
  };

  /** Reopen admission: after the commit on D, after a failure before it on A. A recovery's activation reopens it itself. */
  const reopen = async (): Promise<void> => {
    if (w.recoveryPending) {
      await runStep(op, waitForActivation(op));
      await w.read();
    }
    const end = await runStep(op, reopenAdmission(op));
    // admission_open: someone (a recovery's activation) already reopened it.
    if (!end.ok && 'refusal' in end && end.refusal.code !== 'admission_open') {
      notes.push(`admission could not be reopened (${end.refusal.message}): reopen it with the guarded write reopen-admission`);
    }
    showClosed();
    closed.at = null;
  };

  /** A failure before the commit: D never became the owner, and admission reopens (on A, or by a recovery's activation). */
  const undo = async (code: string, why: string): Promise<MoveOutcome> => {
    const wasClosed = closed.at !== null;
    if (wasClosed) await reopen();
    const owner = w.partition?.owner ?? A;
    const where = !wasClosed
      ? `admission was never closed`
      : owner === A
        ? `admission reopened on ${A}`
        : `the recovery's activation (epoch ${w.epoch}, owner ${owner}) reopened admission`;
    if (code === 'cancel') return { status: 'cancelled', partition, reason: `${op.cancelReason ?? 'cancelled'}; ${where}` };
    return aborted(code, `${why}; ${D} did not become the owner, ${where}`);
  };
  const interrupted = async (i: Interrupt): Promise<MoveOutcome> => {
    switch (i) {
      case 'cancel':
        return undo('cancel', '');
      case 'recovery':
      case 'node_down': {
        // A failed owner opens a recovery: the broker's word, not the order signals came in, says which it was.
        await w.read();
        if (w.recoveryPending || w.epoch > startEpoch) {
          return undo('pending_recovery', `${w.live(A) ? 'a recovery' : `the owner ${A} failed and a recovery`} opened on ${partition} before the commit`);
        }
        if (!w.live(D)) return undo('target_down', `${D} is down before the commit`);
        return undo('owner_down', `the owner ${A} ${w.live(A) ? 'failed and came back' : 'is down'} before the commit`);
      }
      case 'stalled':
        return undo('stalled', `the counted copies did not all become durable at the final boundary ${closed.finalBoundary} within ${Math.round(quiet.maxClosedMs / 1000)}s`);
      case 'deadline':
        return undo('deadline', 'the handoff ran out of time before the commit');
    }
  };
  /** A final refusal; one that a recovery explains (admission reopened by its activation, a new epoch) is the recovery's. */
  const refused = async (r: Refusal, what: string): Promise<MoveOutcome> => {
    await w.read();
    if (r.code === 'node_down' || w.recoveryPending || w.epoch > startEpoch) return interrupted('node_down');
    return undo(r.code, `${what} was refused: ${r.message}`);
  };

  // ---- validating: the same rules the CLI checked, against what the broker says now.
  const ctx = await w.read();
  const check = checkHandoff(ctx.view, ctx.nodes, A, D);
  if (!check.ok) return aborted(check.code, check.message);
  const startEpoch = w.epoch;

  try {
    // ---- wait for a quiet point (bounded), then A closes admission and reports the final boundary.
    const quietEnd = await waitForQuietPoint(op, quiet, beforeCommit);
    if (!quietEnd.ok) return 'interrupt' in quietEnd ? interrupted(quietEnd.interrupt) : aborted('rejected', 'no quiet point');
    if (quietEnd.value === 'bound') {
      notes.push(`no quiet point within ${Math.round(quiet.maxWaitMs / 1000)}s (at most ${quiet.maxInFlight} messages in flight): admission closed anyway`);
    }
    const close = await runStep(op, closeAdmission(op, beforeCommit));
    if (!close.ok) return 'interrupt' in close ? interrupted(close.interrupt) : refused(close.refusal, 'close-admission');
    const fb = close.value;
    closed.at = Date.now();
    closed.finalBoundary = fb;
    op.show({ finalBoundary: fb, admissionClosedMs: 0 });
    // The stall bound is time passing, not an event: its timer's firing is what says it passed.
    void sleep(quiet.maxClosedMs).then(() => {
      closed.tooLong = true;
      w.changed();
    });

    // ---- every counted copy durable at the final boundary, then one guarded write commits D at epoch + 1.
    const notDurable = await durableAtFinal(fb);
    if (notDurable) return interrupted(notDurable);
    const commit = await runStep(op, {
      ...commitOwner(op, D, fb, beforeCommit),
      // The broker's word that a counted copy is still below the final boundary: read again and retry.
      passing: (r: Refusal) => ['generation_mismatch', 'injected', 'pending_recovery', 'not_caught_up', 'boundary_not_covered'].includes(r.code),
      onPassing: async (r: Refusal) => {
        if (r.code === 'not_caught_up') await w.read();
      },
    });
    if (!commit.ok) return 'interrupt' in commit ? interrupted(commit.interrupt) : refused(commit.refusal, `committing ${D} as owner`);
  } catch (err) {
    // A request the broker rejects for good, before the commit: admission reopens on A.
    const cause = rejection(err);
    if (!cause) throw err;
    return undo(cause.type ?? 'rejected', `the broker rejected a request while ${op.phase.replace(/_/g, ' ')}: ${cause.message}`);
  }

  // ---- past the commit: D owns the partition at epoch + 1; only finishing or ordinary recovery remain.
  const committedEpoch = w.epoch;
  op.refuseCancel(
    () =>
      `refused: ${D} already owns ${partition} at epoch ${committedEpoch} (committed with the continuation certificate ` +
      `for final boundary ${closed.finalBoundary}); the handoff only reopens admission on ${D} now. To give the owner ` +
      `back, hand it off from ${D} to ${A} once this one completes.`,
  );
  if (op.cancelReason !== null) notes.push(`a cancel (${op.cancelReason}) came while the commit was in flight; the commit went through`);
  await reopen();
  if (w.epoch > committedEpoch) {
    notes.push(`a recovery opened after the commit: ordinary recovery took over, activated epoch ${w.epoch} and reopened admission`);
  }
  return {
    status: 'completed',
    partition,
    from: A,
    to: D,
    boundary: null,
    epoch: committedEpoch,
    finalBoundary: closed.finalBoundary!,
    admissionClosedMs: op.snapshot().admissionClosedMs!,
    ...(notes.length > 0 ? { note: notes.join('; ') } : {}),
  };
}

/**
 * Runs `body` as one operation of `kind`: its status, cancel and Temporal ending (see Operation). A request the
 * broker rejects for good outside a step's own handling (a read of a partition that is gone) ends it aborted.
 */
export function runOperation(
  kind: 'owner-handoff' | 'owner-move',
  request: HandoffRequest | OwnerMoveRequest,
  body: (op: Operation) => Promise<MoveOutcome>,
): Promise<MoveOutcome> {
  const { partition, from, to, origin } = request;
  const op = begin({ kind, partition, from, to, origin }, request);
  return op.run(async () => {
    try {
      return await body(op);
    } catch (err) {
      const cause = rejection(err);
      if (!cause) throw err;
      return { status: 'aborted', partition, code: cause.type ?? 'rejected', reason: cause.message };
    }
  });
}

export async function ownerHandoff(request: HandoffRequest): Promise<MoveOutcome> {
  return runOperation('owner-handoff', request, (op) => handOff(op, request.from, request.to, request.quietPoint));
}
