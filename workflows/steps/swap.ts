/** Step 1, the swap (alone or with step 2 chained), and the swap back, with what ends the wait for a lost T. */
import type { Rejected } from '../../activities';
import type { WriteReply } from '../../cluster/contract';
import type { Operation } from './operation';
import { legacyNow } from './legacy-clock';
import { codes, COMMON_PASSING, noInterrupts, type WriteStep } from './step';
import type { Interrupt } from './watch';

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
      op.swappedAt(boundary);
      return boundary;
    },
    passing: codes(...COMMON_PASSING, 'no_sync_budget', 'not_caught_up', 'not_admitted', 'change_in_flight', 'admission_closed'),
    interrupts,
    retrying: (r) => `retrying the swap: ${r.message}`,
    readProgress: true,
  };
}

/**
 * The swap back (docs/operations/follower-move.md, "Swap back when T is lost after the swap"): the leaving R counts
 * again and `joined`, the T that joined in its place, is leaving; returns B', the confirmed tail then. R down, behind
 * or rejoining passes (the broker checks R as it checks any joining replica); T no longer the one that joined in R's
 * place ends it.
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
      op.swappedAt(b.offset);
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
