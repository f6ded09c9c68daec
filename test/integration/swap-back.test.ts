/**
 * The swap back, end to end (docs/operations/follower-move.md, "Swap back when T is lost after the swap"): a follower
 * move whose T is lost for good right after the swap ends with R counting again and T removed, after swapBackAfterMs
 * or on an operator's cancel while T is down. Publishing goes on throughout, W never changes and the checker sees no
 * breach (no confirmed message lost).
 */
import type { Client } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cancelMove, startFollowerMove, type MovesContext } from '../../operations/moves';
import type { Partition } from '../../cluster/contract';
import { statusQuery, type MoveOutcome, type MoveStatus } from '../../rules/definitions';
import { eventually, outcomeOf, pickMove, replayAndKeep, startSuite, type TestCluster } from './helpers';
import { armFault, type Armed } from './write-faults';

let cluster: TestCluster;
let client: Client;
let ctx: MovesContext;
let stop: (() => Promise<void>) | undefined;
let armed: Armed | null = null;
const taskQueue = `swap-back-${process.pid}`;

beforeAll(async () => {
  ({ cluster, client, ctx, stop } = await startSuite(taskQueue, { wrap: (real) => armFault(real, () => armed) }));
});

afterAll(async () => {
  await stop?.();
});

afterEach(async () => {
  expect((await cluster.client.invariants()).breaches).toEqual([]);
});

/**
 * Start a move of `partition` whose T is killed for good right after the swap (never restarted), watching
 * the confirmed tail and W until `stop`.
 */
async function moveLosingT(partition: string, swapBackAfterMs: number) {
  const { from, to } = await pickMove(cluster.client, partition);
  const before = await cluster.client.partition(partition);
  const a: Armed = { partition, write: 'swap', when: 'after', faults: [{ fault: 'crash-node', node: to }], fired: false };
  armed = a;
  const handle = await startFollowerMove(ctx, { partition, from, to, origin: 'operator', timing: { pollMs: 500, retryMs: 300, swapBackAfterMs } });
  const seen: { confirmed: number; W: number }[] = [];
  let done = false;
  const watching = (async () => {
    while (!done) {
      const v = await cluster.client.partition(partition);
      seen.push({ confirmed: v.progress.confirmedTail, W: v.partition.writeRequirement });
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const stop = async () => {
    done = true;
    await watching;
  };
  return { from, to, before, handle, a, seen, stop };
}

/** The move's status once it waits for T, down after the swap. */
function waitingForT(m: Awaited<ReturnType<typeof moveLosingT>>): Promise<MoveStatus> {
  return eventually('the move waiting for T after the swap', async () => {
    const s = await m.handle.query(statusQuery);
    return s.blockingReason?.includes('is down after the swap') ? s : undefined;
  });
}

/** R counts again, T is gone from the assignment and the eligible set, publishing went on, W never moved. */
async function expectSwappedBack(m: Awaited<ReturnType<typeof moveLosingT>>, outcome: MoveOutcome): Promise<Partition> {
  expect(m.a.fired).toBe(true);
  const reason = 'reason' in outcome ? outcome.reason : '';
  expect(reason).toMatch(new RegExp(`${m.to} was lost after the swap at boundary \\d+; swapped back at B' \\d+: ${m.from} counts again and ${m.to} was removed`));
  const after = await cluster.client.partition(m.before.partition.id);
  const p = after.partition;
  expect(p.followers).toContain(m.from);
  expect(p.followers).not.toContain(m.to);
  expect(p.leaving).toBeNull();
  expect(p.learners).toEqual([]);
  expect(p.history.map((h) => h.node)).not.toContain(m.to);
  expect(p.history.map((h) => h.node)).toContain(m.from);
  expect(p.writeRequirement).toBe(m.before.partition.writeRequirement);
  expect(p.epoch).toBe(m.before.partition.epoch);
  expect(m.seen.every((s) => s.W === m.before.partition.writeRequirement)).toBe(true);
  for (let i = 1; i < m.seen.length; i++) expect(m.seen[i]!.confirmed).toBeGreaterThanOrEqual(m.seen[i - 1]!.confirmed);
  // Publishing went on while T was down and after the swap back.
  const tail = after.progress.confirmedTail;
  expect(tail).toBeGreaterThan(m.before.progress.confirmedTail);
  await eventually('confirms continue after the move', async () => ((await cluster.client.progress(p.id)).confirmedTail > tail ? true : undefined));
  return p;
}

describe('the swap back', () => {
  it('T killed for good after the swap: after swapBackAfterMs R counts again and T is removed (aborted target_lost)', async () => {
    const m = await moveLosingT('q-0', 3_000);
    await waitingForT(m);
    const outcome = await outcomeOf(m.handle);
    await m.stop();
    expect(outcome).toMatchObject({ status: 'aborted', code: 'target_lost' });
    await expectSwappedBack(m, outcome);
    await replayAndKeep(client, m.handle.workflowId, 'v3-swap-back-after-bound');
  });

  it('an operator cancel after the swap while T is down swaps back at once (cancelled)', async () => {
    // A bound far beyond the test: only the cancel can end the wait.
    const m = await moveLosingT('q-4', 600_000);
    const waiting = await waitingForT(m);
    expect(waiting.blockingReason).toContain('(a cancel swaps back at once)');
    const accepted = await cancelMove(client, 'q-4', 'T is gone for good');
    expect(accepted).toBeTruthy();
    const outcome = await outcomeOf(m.handle);
    await m.stop();
    expect(outcome).toMatchObject({ status: 'cancelled' });
    expect('reason' in outcome ? outcome.reason : '').toMatch(/^T is gone for good: /);
    await expectSwappedBack(m, outcome);
    await replayAndKeep(client, m.handle.workflowId, 'v3-swap-back-cancelled');
  });
});
