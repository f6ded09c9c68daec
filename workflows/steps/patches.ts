/**
 * The step library's patches: what executions started before each behaved like, asked once when an operation begins
 * (`begin()` in operation.ts) except ADMITTED_BEFORE_REPLY, which ADMISSION_KEPT replaced. docs/versioning.md lists
 * them with their fixtures. A type that folded them (`followerMoveV3`) takes them without asking (`takes`).
 */
import { patched } from '@temporalio/workflow';

/** Executions that have it read with normal activities and decide every deadline, bound and stall on timers. */
export const DECIDE_ON_TIMERS = 'decide-on-timers';

/**
 * Executions that have it keep an admission signalled before the add-learner's reply was taken in. A learner that
 * catches up at once is admitted, and the relay tells the move, before the reply's workflow task runs (signals run
 * first in one activation); without it the reply reset the admission and the move waited for its poll timer
 * (30 s: the moves' p99 overhead at 200 moves was 38 s against a 7 s floor).
 */
export const ADMITTED_BEFORE_REPLY = 'admitted-before-reply';

/**
 * Executions that have it keep an admission signalled before the add-learner's reply as ADMITTED_BEFORE_REPLY does,
 * with the patch asked when the operation begins. ADMITTED_BEFORE_REPLY is asked at the reply only when such a signal
 * came first, so whether its marker is written hung on how the signal and the reply fell into workflow tasks, which
 * a replay can see otherwise than the first run (see DEADLINE_AT_START); the admission itself comes out the same
 * either way (kept when the signal came first, set by the signal when it came after).
 */
export const ADMISSION_KEPT = 'admission-kept';

/**
 * Executions that have it place a pending recovery at the epoch that failed, as the broker says it, and take none
 * of an epoch older than the partition's known epoch (that one has activated). Before it a `pending_recovery`
 * refusal opened one at the epoch the watch knew when the reply was taken in: a refusal sent before an activation
 * and taken in after the activation's signal (signals run first in an activation; a lost reply's retry returns the
 * first reply) opened a recovery of the activated epoch, which no read of that epoch clears, and the move waited for
 * an activation that would never come.
 */
export const RECOVERY_AT_ITS_EPOCH = 'recovery-at-its-epoch';

/**
 * Executions that have it fix a transfer's catch-up deadline when the attempt starts, from the broker's reply to the
 * add-learner (its progress read) or the last read, as PD fixes a step's timeout when the step is created. Before
 * it the deadline took the bytes the watch knew at that moment, signals included, and grew with every larger report:
 * a progress signal that shares a workflow task with the reply runs before it (signals first), so whether the first
 * deadline timer fired "expired" or "armed again for the rest" hung on how events fell into tasks, which a replay
 * can see otherwise than the first run (CI: "UpsertWorkflowSearchAttributesMachine does not handle TimerStarted").
 */
export const DEADLINE_AT_START = 'deadline-at-start';

/**
 * Executions that have it space a wait's polls out: each re-read in one wait doubles the delay to the next, up to
 * POLL_BACKOFF times pollMs (30, 60, 120, 120 s ... by default). The poll is the net under a lost or late event; a
 * move catching up for minutes re-read every 30 s, a timer and an activity each time. Measured at 1,000 moves in
 * flight it saves broker reads and history events, not worker tasks, which follow the relay's signals there
 * (docs/scale.md). The delay depends only on how many reads this wait made, so no signal's place among a task's
 * events decides it.
 */
export const POLL_BACKS_OFF = 'poll-backs-off';

/**
 * Executions that have it poll with `readPartition`: the partition's record and progress, whose replicas carry the
 * liveness of its nodes, where a poll read every node too (`readMoveContext`). A wait consults the liveness of the
 * partition's own nodes only (a node it no longer names is heard of from the relay's node signals), and every poll
 * recorded every node in the move's history: about 170 KB at 1,000 nodes, past the 512 KB Temporal warns at near
 * 3,000; and the broker's list of nodes went over every partition (100,000 at size) for their rates, at each poll.
 */
export const POLL_READS_THE_PARTITION = 'poll-reads-the-partition';

/** The patches a watch's behaviour depends on, asked once when the operation begins. */
export interface WatchPatches {
  /** DECIDE_ON_TIMERS: reads are normal activities and time decisions are set by timers. */
  onTimers: boolean;
  /** RECOVERY_AT_ITS_EPOCH. */
  recoveryAtItsEpoch: boolean;
  /** DEADLINE_AT_START. */
  deadlineAtStart: boolean;
  /** ADMISSION_KEPT. */
  admissionKept: boolean;
  /** POLL_BACKS_OFF. */
  pollBacksOff: boolean;
  /** POLL_READS_THE_PARTITION. */
  pollReadsThePartition: boolean;
}

/** Executions that have it swap back when T is lost after the swap (the follower move, and an owner move's first stage). */
export const SWAP_BACK = 'swap-back';

/** Executions that have it keep their outcome in their memo however they end, not only when cancelled. */
export const OUTCOME_MEMO = 'outcome-memo';

/**
 * The patches a type that folded them takes without asking (`followerMoveV3`): the step library's, as they were when
 * it was folded. A patch added after must be asked in every type, folded or not: a folded type's executions already
 * running took the old branch.
 */
const FOLDED = new Set([DECIDE_ON_TIMERS, RECOVERY_AT_ITS_EPOCH, DEADLINE_AT_START, ADMISSION_KEPT, POLL_BACKS_OFF, POLL_READS_THE_PARTITION, SWAP_BACK, OUTCOME_MEMO]);

/**
 * Whether an execution takes patch `id`'s new branch: without asking where its type folded the patch, else as
 * `patched` says (the marker in its history, or a new execution). Asking writes a marker and an upsert of the
 * TemporalChangeVersion search attribute in every new execution.
 */
export function takes(id: string, folded: boolean): boolean {
  return (folded && FOLDED.has(id)) || patched(id);
}

/** Ask the patches a watch depends on: once, first, when the operation begins. */
export function watchPatches(folded: boolean): WatchPatches {
  return {
    onTimers: takes(DECIDE_ON_TIMERS, folded),
    recoveryAtItsEpoch: takes(RECOVERY_AT_ITS_EPOCH, folded),
    deadlineAtStart: takes(DEADLINE_AT_START, folded),
    admissionKept: takes(ADMISSION_KEPT, folded),
    pollBacksOff: takes(POLL_BACKS_OFF, folded),
    pollReadsThePartition: takes(POLL_READS_THE_PARTITION, folded),
  };
}
