/**
 * The step library's rules that need no Temporal: which refusals pass and which end each step, what the Watch
 * keeps from records, signals and reads, what interrupts a learner, and the words a wait reports.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Partition, PartitionView, Refusal } from '../../cluster/contract';
import { classifyRemovalRefusal } from '../../rules/follower-move-rules';
import { Operation } from '../../workflows/steps/operation';
import { addLearner, dropLearner, learnerInterrupts } from '../../workflows/steps/learner';
import { commitOwner } from '../../workflows/steps/owner';
import { removeLeaving, waitDurable } from '../../workflows/steps/remove-leaving';
import { swap, swapBack, targetLostInterrupts } from '../../workflows/steps/swap';
import type { WatchPatches } from '../../workflows/steps/patches';
import { DEFAULT_TIMING, Watch } from '../../workflows/steps/watch';

const partition: Partition = {
  id: 'q-0', kind: 'queue', owner: 'n1', followers: ['n2', 'n3'], learners: [], leaving: null, epoch: 2, generation: 5,
  replicationFactor: 3, durability: { mode: 'majority_durable' }, writeRequirement: 2,
  history: ['n1', 'n2', 'n3'].map((node) => ({ node, processId: `${node}-p`, storageInstance: `${node}-s`, suspended: false })),
  pendingRecovery: null, admission: 'open', boundary: null, retainedCopies: [], historyBytes: 0, publishRate: 0, deliveryRate: 0,
};

/** A read of the partition at broker time `now`, with the learner n4's progress. */
function view(p: Partial<Partition>, learner?: { durableOffset: number; bytesRemaining: number; stalledSince?: number | null }, now = 0): PartitionView {
  const record = { ...partition, ...p };
  return {
    partition: record,
    progress: {
      partition: 'q-0', generation: record.generation, epoch: record.epoch, now, tail: 100, confirmedTail: 90, logStart: 0, messageBytes: 1,
      boundary: null,
      replicas: learner
        ? [{ node: 'n4', role: 'learner', stalledSince: null, ...learner, live: true, admitted: false, suspended: false, phase: 'tail', pausedForRecovery: false }]
        : [],
    },
  };
}

/** A watch with every patch (unless told otherwise), with vitest's fake timers standing in for workflow timers. */
function setup(timing = {}, patches: Partial<WatchPatches> = {}) {
  const all = { onTimers: true, recoveryAtItsEpoch: true, deadlineAtStart: true, admissionKept: true, pollBacksOff: true, pollReadsThePartition: true, ...patches };
  const watch = new Watch('q-0', { ...DEFAULT_TIMING, ...timing }, all, (ms) => new Promise((r) => setTimeout(r, ms)));
  const op = new Operation({ kind: 'follower-move', partition: 'q-0', from: 'n2', to: 'n4', origin: 'operator' }, watch);
  return { watch, op };
}

const refusal = (code: string, saw: Record<string, unknown> = {}): Refusal => ({ code, message: code, saw }) as Refusal;
const none = () => null;

describe('which refusals pass by themselves and which end a step', () => {
  const { op } = setup();
  const cases: [string, { passing: (r: Refusal) => boolean }, string[], string[]][] = [
    ['add-learner', addLearner(op, 'n4', none), ['no_sync_budget', 'generation_mismatch', 'injected', 'pending_recovery', 'admission_closed'], ['change_in_flight', 'node_down', 'already_a_replica', 'node_draining']],
    ['swap', swap(op, 'n4', 'n2', none), ['not_admitted', 'not_caught_up', 'change_in_flight', 'generation_mismatch'], ['node_down', 'not_a_learner', 'not_a_follower']],
    ['swap back', swapBack(op, 'n2', 'n4'), ['not_admitted', 'not_caught_up', 'node_down', 'generation_mismatch', 'pending_recovery'], ['not_a_follower', 'not_a_learner', 'change_in_flight']],
    ['drop-learner', dropLearner(op, 'n4'), ['generation_mismatch', 'pending_recovery'], ['not_a_learner', 'unknown_node']],
    ['commit-owner', commitOwner(op, 'n4', 90, none), ['boundary_not_covered', 'generation_mismatch'], ['certificate_mismatch', 'not_a_follower']],
  ];
  it.each(cases)('%s', (_name, step, passing, final) => {
    for (const code of passing) expect(step.passing(refusal(code)), code).toBe(true);
    for (const code of final) expect(step.passing(refusal(code)), code).toBe(false);
  });

  it('remove-leaving: T down or below B passes, another node down or R no longer leaving ends it', () => {
    const step = removeLeaving(op, 'n2', 'n4', 90, (r) => classifyRemovalRefusal(r, 'n4'));
    expect(step.passing(refusal('boundary_not_covered'))).toBe(true);
    expect(step.passing(refusal('pending_recovery'))).toBe(true);
    expect(step.passing(refusal('node_down', { node: 'n4' }))).toBe(true);
    expect(step.passing(refusal('node_down', { node: 'n3' }))).toBe(false);
    expect(step.passing(refusal('not_leaving'))).toBe(false);
    expect(step.passing(refusal('not_a_follower'))).toBe(false);
  });
});

describe('what the Watch keeps', () => {
  it('a record older than the generation seen never takes back an admission', () => {
    const { watch } = setup();
    const admitted = [...partition.history, { node: 'n4', processId: 'p', storageInstance: 's', suspended: false }];
    watch.notePartition({ ...partition, generation: 7, learners: ['n4'], history: admitted });
    expect(watch.admitted('n4')).toBe(true);
    watch.notePartition({ ...partition, generation: 6, learners: ['n4'] });
    expect(watch.admitted('n4')).toBe(true);
    watch.notePartition({ ...partition, generation: 8, learners: ['n4'] });
    expect(watch.admitted('n4')).toBe(false);
  });

  // The relay can tell a move of the admission before the add-learner's reply is taken in, in the reply's workflow
  // task or a later one (a replay can group them otherwise than the first run): the learner ends admitted either way.
  it.each([
    ['before', true],
    ['after', false],
  ])('an admission signalled %s the add-learner reply is kept, asking no patch at the reply', (_when, signalFirst) => {
    const { watch } = setup();
    const signal = () => watch.heardAdmitted({ node: 'n4', generation: 7 });
    if (signalFirst) signal();
    watch.noteReply({ ok: true, write: 'add-learner', partition: { ...partition, generation: 6, learners: ['n4'] } } as never);
    watch.learnerAdded('n4', 6);
    if (!signalFirst) signal();
    expect(watch.admitted('n4')).toBe(true);
  });

  it('an admission older than the add-learner is an earlier learner\'s: not kept', () => {
    const { watch } = setup();
    watch.heardAdmitted({ node: 'n4', generation: 5 });
    watch.noteReply({ ok: true, write: 'add-learner', partition: { ...partition, generation: 6, learners: ['n4'] } } as never);
    watch.learnerAdded('n4', 6);
    expect(watch.admitted('n4')).toBe(false);
  });

  it('a pending recovery clears only with an epoch past the one that failed', () => {
    const { watch } = setup();
    watch.notePartition({ ...partition, pendingRecovery: { epoch: 2, openedAt: 0, reason: 'owner failed', failedOwner: 'n1' } });
    expect(watch.recoveryPending).toBe(true);
    watch.notePartition({ ...partition, epoch: 2 });
    expect(watch.recoveryPending).toBe(true);
    watch.notePartition({ ...partition, epoch: 3, generation: 6 });
    expect(watch.recoveryPending).toBe(false);
  });

  it('a pending_recovery refusal taken in after the activation opens nothing; a read of the activated epoch would not clear it', () => {
    const { watch } = setup();
    const failed = { epoch: 2, openedAt: 0, reason: 'owner failed', failedOwner: 'n1' };
    watch.notePartition({ ...partition, pendingRecovery: failed });
    watch.notePartition({ ...partition, epoch: 3, generation: 6 });
    expect(watch.recoveryPending).toBe(false);
    watch.noteReply({ ok: false, write: 'swap', refusal: refusal('pending_recovery', failed) }, 2);
    expect(watch.recoveryPending).toBe(false);
    // A broker whose refusal does not say the epoch: the one known when the write was sent.
    watch.noteReply({ ok: false, write: 'swap', refusal: refusal('pending_recovery') }, 2);
    expect(watch.recoveryPending).toBe(false);
    // A stale read of the pending recovery neither.
    watch.notePartition({ ...partition, pendingRecovery: failed });
    expect(watch.recoveryPending).toBe(false);
    // A recovery of the epoch known is pending.
    watch.noteReply({ ok: false, write: 'swap', refusal: refusal('pending_recovery', { ...failed, epoch: 3 }) }, 3);
    expect(watch.recoveryPending).toBe(true);
    watch.notePartition({ ...partition, epoch: 4, generation: 7 });
    expect(watch.recoveryPending).toBe(false);
  });

  it("a generation mismatch takes the broker's generation, even below one seen: a recreated record starts over", () => {
    const { watch } = setup();
    watch.notePartition({ ...partition, generation: 9 });
    watch.noteReply({ ok: false, refusal: refusal('generation_mismatch', { current: 2, expected: 9 }) } as never);
    expect(watch.generation).toBe(2);
  });

  it('durable offsets are a maximum; bytes remaining follow the highest offset', () => {
    const { watch } = setup();
    watch.absorb(view({}, { durableOffset: 50, bytesRemaining: 40 }));
    watch.absorb(view({}, { durableOffset: 40, bytesRemaining: 60 }));
    expect(watch.durable('n4')).toBe(50);
    expect(watch.replica('n4').bytesRemaining).toBe(40);
  });
});

describe('what interrupts a learner before it counts', () => {
  beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => vi.useRealTimers());

  it('in order: recovery, cancel, the learner down, then stall and deadline once its transfer is watched', async () => {
    const { watch, op } = setup({ stallAbortMs: 1_000 });
    const interrupts = learnerInterrupts(op, 'n4');
    expect(interrupts()).toBeNull();
    watch.trackTransfer('n4');
    await vi.advanceTimersByTimeAsync(999);
    expect(interrupts()).toBeNull();
    await vi.advanceTimersByTimeAsync(1);
    expect(interrupts()).toBe('stalled');
    watch.noteLive('n4', false);
    expect(interrupts()).toBe('node_down');
    op.requestCancel('test');
    expect(interrupts()).toBe('cancel');
    watch.notePartition({ ...partition, pendingRecovery: { epoch: 2, openedAt: 0, reason: 'owner failed', failedOwner: 'n1' } });
    expect(interrupts()).toBe('recovery');
  });

  it('before patch deadline-at-start, the catch-up deadline is armed again for the rest when the largest transfer reported grew', async () => {
    const { watch, op } = setup({ catchUpBaseMs: 1_000, catchUpFloorBytesPerSec: 1_000_000 }, { deadlineAtStart: false });
    const interrupts = learnerInterrupts(op, 'n4');
    watch.trackTransfer('n4');
    watch.absorb(view({ learners: ['n4'] }, { durableOffset: 10, bytesRemaining: 10_000_000 }, 100));
    watch.absorb(view({ learners: ['n4'] }, { durableOffset: 20, bytesRemaining: 5_000_000 }, 200));
    await vi.advanceTimersByTimeAsync(1_000 + 10_000 - 1);
    expect(interrupts()).toBeNull();
    await vi.advanceTimersByTimeAsync(1);
    expect(interrupts()).toBe('deadline');
  });

  // A progress signal that shares a workflow task with the add-learner's reply runs first; a replay can group them
  // otherwise than the first run did, so the deadline must come out the same either way.
  it.each([
    ['before', true],
    ['after', false],
  ])('the catch-up deadline is fixed from the reply when the attempt starts: a progress signal %s it changes nothing', async (_when, signalFirst) => {
    const { watch, op } = setup({ catchUpBaseMs: 1_000, catchUpFloorBytesPerSec: 1_000_000 });
    const interrupts = learnerInterrupts(op, 'n4');
    const signal = () =>
      watch.heardProgress({
        at: 60, generation: 6, confirmedTail: 90, boundary: null,
        replicas: [{ node: 'n4', durableOffset: 5, bytesRemaining: 3_000_000, stalled: false, pausedForRecovery: false }],
      });
    if (signalFirst) signal();
    // The add-learner's reply with its progress read: 2 MB to copy, so 1 s + 2 s allowed (the signal is newer and says 3 MB).
    watch.absorb(view({ learners: ['n4'], generation: 6 }, { durableOffset: 0, bytesRemaining: 2_000_000 }, 50));
    watch.trackTransfer('n4');
    if (!signalFirst) signal();
    await vi.advanceTimersByTimeAsync(3_000 - 1);
    expect(interrupts()).toBeNull();
    await vi.advanceTimersByTimeAsync(1);
    expect(interrupts()).toBe('deadline');
  });

  it('the stall abort counts on the broker\'s clock and fires only for the stall it was armed for', async () => {
    const { watch, op } = setup({ stallAbortMs: 1_000, catchUpBaseMs: 600_000 });
    const interrupts = learnerInterrupts(op, 'n4');
    watch.trackTransfer('n4');
    // The broker says it progresses: no stall timer.
    watch.absorb(view({ learners: ['n4'] }, { durableOffset: 10, bytesRemaining: 100, stalledSince: null }, 5_000));
    await vi.advanceTimersByTimeAsync(5_000);
    expect(interrupts()).toBeNull();
    // Stalled since 5_300 as of 5_700 by the broker's clock: 600 ms of the 1_000 are left.
    watch.absorb(view({ learners: ['n4'] }, { durableOffset: 10, bytesRemaining: 100, stalledSince: 5_300 }, 5_700));
    expect(watch.stalledFor('n4')).toBe(400);
    await vi.advanceTimersByTimeAsync(599);
    expect(interrupts()).toBeNull();
    await vi.advanceTimersByTimeAsync(1);
    expect(interrupts()).toBe('stalled');
  });

  it('progress before the stall timer fires starts the stall over', async () => {
    const { watch, op } = setup({ stallAbortMs: 1_000, catchUpBaseMs: 600_000 });
    const interrupts = learnerInterrupts(op, 'n4');
    watch.trackTransfer('n4');
    watch.absorb(view({ learners: ['n4'] }, { durableOffset: 10, bytesRemaining: 100, stalledSince: 0 }, 0));
    await vi.advanceTimersByTimeAsync(500);
    watch.absorb(view({ learners: ['n4'] }, { durableOffset: 20, bytesRemaining: 90, stalledSince: null }, 500));
    watch.absorb(view({ learners: ['n4'] }, { durableOffset: 20, bytesRemaining: 90, stalledSince: 600 }, 800));
    // The first timer fires at 1_000 for a stall that ended: armed again for the one since 600 (seen 200 ms long).
    await vi.advanceTimersByTimeAsync(500 + 799);
    expect(interrupts()).toBeNull();
    await vi.advanceTimersByTimeAsync(1);
    expect(interrupts()).toBe('stalled');
  });
});

describe('waiting until durable at a boundary', () => {
  it('is done only with the node live, at or past B and no recovery pending, and says what it waits for', () => {
    const { watch, op } = setup();
    const step = waitDurable(op, ['n4'], 90, { keeps: 'n2', since: 'after the swap' });
    watch.absorb(view({}, { durableOffset: 80, bytesRemaining: 0 }));
    expect(step.done()).toBe(false);
    expect(step.describe()).toBe('waiting for n4 durable at 90: at 80');
    watch.absorb(view({}, { durableOffset: 95, bytesRemaining: 0 }));
    expect(step.done()).toBe(true);
    watch.noteLive('n4', false);
    expect(step.done()).toBe(false);
    expect(step.describe()).toBe('n4 is down after the swap: n2 stays eligible and keeps its data; waiting for n4 to return or for recovery');
  });
});

describe('the swap back after T is lost past the swap', () => {
  afterEach(() => vi.useRealTimers());

  it('interrupts the removal on a cancel, or once T has been down for swapBackAfterMs in a row', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { watch, op } = setup({ swapBackAfterMs: 5_000 });
    const lost = targetLostInterrupts(op, 'n4');
    expect(lost()).toBeNull();
    watch.noteLive('n4', false);
    expect(lost()).toBeNull();
    await vi.advanceTimersByTimeAsync(4_000);
    expect(lost()).toBeNull();
    // T back for a moment: the bound starts over when it goes down again.
    watch.noteLive('n4', true);
    expect(lost()).toBeNull();
    watch.noteLive('n4', false);
    expect(lost()).toBeNull();
    await vi.advanceTimersByTimeAsync(4_000);
    expect(lost()).toBeNull();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(lost()).toBe('deadline');
    op.requestCancel('test');
    expect(lost()).toBe('cancel');
    const step = removeLeaving(op, 'n2', 'n4', 90, (r) => classifyRemovalRefusal(r, 'n4'), lost);
    expect(step.interrupts()).toBe('cancel');
    expect(step.before!.interrupts()).toBe('cancel');
    expect(step.before!.describe()).toBe(
      'n4 is down after the swap: n2 stays eligible and keeps its data; waiting for n4 to return or for the swap back after 5s down (a cancel swaps back at once)',
    );
  });

  it('is finished once the record shows R joined back and T leaving, with B\' as its value', () => {
    const { watch, op } = setup();
    const step = swapBack(op, 'n2', 'n4');
    expect(step.body()).toEqual({ learner: 'n2', leaving: 'n4' });
    watch.notePartition({ ...partition, followers: ['n4', 'n3'], leaving: 'n2', boundary: { offset: 80, joined: 'n4', leaving: 'n2', epoch: 2 } });
    expect(step.finished!()).toBeNull();
    watch.notePartition({
      ...partition,
      generation: 6,
      leaving: 'n4',
      boundary: { offset: 95, joined: 'n2', leaving: 'n4', epoch: 2, swappedBack: true },
    });
    expect(step.finished!()).toEqual({ value: 95 });
    expect(op.boundary).toBe(95);
  });
});
