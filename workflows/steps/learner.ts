/** The learner's steps: step 0 (add a learner, wait for its admission), the promotion, and the drop that undoes step 0. */
import { formatBytes } from '../../rules/format';
import type { Operation } from './operation';
import { codes, COMMON_PASSING, noInterrupts, rejection, runStep, waitForActivation, type WaitStep, type WriteStep } from './step';
import type { Interrupt } from './watch';

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
    // The reply carries the learner's bytes to copy, which its catch-up deadline is fixed from.
    readProgress: w.deadlineAtStart,
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
