/**
 * The follower move end to end: real Temporal dev server, real reference cluster over HTTP, the project's
 * worker and relay. Each test asserts the final assignment, the outcome and zero invariant breaches.
 */
import type { Client } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MoveRefused, cancelMove, showMove, startFollowerMove, type MovesContext } from '../../client/moves';
import type { Partition } from '../../cluster/contract';
import { statusQuery, type MoveStatus, type MoveTiming } from '../../workflows/definitions';
import { connectClient, eventually, pickMove, replayAndKeep, startTestCluster, startWorker } from './helpers';

type TestCluster = Awaited<ReturnType<typeof startTestCluster>>;

let cluster: TestCluster;
let client: Client;
let ctx: MovesContext;
let stopWorker: () => Promise<void>;
const taskQueue = `moves-${process.pid}`;

beforeAll(async () => {
  cluster = await startTestCluster();
  client = await connectClient();
  const { w, running } = await startWorker(cluster.url, taskQueue);
  stopWorker = async () => {
    w.shutdown();
    await running;
  };
  ctx = { client, cluster: cluster.client, taskQueue };
});

afterAll(async () => {
  await stopWorker?.();
  await cluster?.close();
});

afterEach(async () => {
  const report = await cluster.client.invariants();
  expect(report.breaches).toEqual([]);
});

async function partition(id: string): Promise<Partition> {
  return (await cluster.client.partition(id)).partition;
}

async function statusOf(id: string): Promise<MoveStatus> {
  return client.workflow.getHandle(`reconfigure-${id}`).query(statusQuery);
}

async function untilPhase(id: string, phases: MoveStatus['phase'][]): Promise<MoveStatus> {
  return eventually(`move of ${id} in ${phases.join('/')}`, async () => {
    const s = await statusOf(id);
    return phases.includes(s.phase) ? s : undefined;
  });
}

/** Start a move whose learner cannot progress (its transfer is stalled), once it is catching up. */
async function startHeldMove(id: string, origin: 'operator' | 'planner', timing: Partial<MoveTiming> = { pollMs: 500 }) {
  const { from, to } = await pickMove(cluster.client, id);
  await cluster.client.fault({ fault: 'stall-transfer', partition: id, node: to, stalled: true });
  const handle = await startFollowerMove(ctx, { partition: id, from, to, origin, timing });
  await untilPhase(id, ['catching_up']);
  const release = () => cluster.client.fault({ fault: 'stall-transfer', partition: id, node: to, stalled: false });
  return { from, to, handle, release };
}

describe('follower move', () => {
  it('moves a follower while publishes keep confirming, never fenced, and R keeps a retained copy', async () => {
    const id = 'q-0';
    const { from, to } = await pickMove(cluster.client, id);
    const before = await cluster.client.partition(id);
    const handle = await startFollowerMove(ctx, { partition: id, from, to, origin: 'operator' });

    // Watch the partition while the move runs: it keeps confirming and never takes a recovery fence.
    const seen: { confirmed: number; fenced: boolean; W: number }[] = [];
    let done = false;
    const watching = (async () => {
      while (!done) {
        const v = await cluster.client.partition(id);
        seen.push({ confirmed: v.progress.confirmedTail, fenced: v.partition.pendingRecovery !== null || v.partition.admission === 'closed', W: v.partition.writeRequirement });
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const outcome = await handle.result();
    done = true;
    await watching;

    expect(outcome).toMatchObject({ status: 'completed', partition: id, from, to });
    const after = await cluster.client.partition(id);
    expect(after.partition.followers).toContain(to);
    expect(after.partition.followers).not.toContain(from);
    expect(after.partition.leaving).toBeNull();
    expect(after.partition.history.map((h) => h.node)).not.toContain(from);
    expect(after.partition.retainedCopies.map((c) => c.node)).toContain(from);
    expect(after.partition.writeRequirement).toBe(before.partition.writeRequirement);
    expect(after.partition.epoch).toBe(before.partition.epoch);
    expect(seen.every((s) => !s.fenced)).toBe(true);
    expect(seen.every((s) => s.W === before.partition.writeRequirement)).toBe(true);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.confirmed).toBeGreaterThanOrEqual(seen[i - 1]!.confirmed);
    expect(after.progress.confirmedTail).toBeGreaterThan(before.progress.confirmedTail);

    const status = await handle.query(statusQuery);
    expect(status).toMatchObject({ phase: 'completed', boundary: outcome.status === 'completed' ? outcome.boundary : -1, blockingReason: null });
    expect(status.targetDurable).toBeGreaterThanOrEqual(status.boundary!);
    const detail = await showMove(client, id);
    expect(detail).toMatchObject({ running: false, outcome: { status: 'completed' } });
    await replayAndKeep(client, handle.workflowId, 'happy-path');
  });

  it('refuses bad requests before anything is written, saying what was wrong', async () => {
    const p = await partition('q-1');
    const generation = p.generation;
    const outsider = (await cluster.client.topology()).nodes.find((n) => ![p.owner, ...p.followers].includes(n.id))!.id;
    const cases: [Parameters<typeof startFollowerMove>[1], string, RegExp][] = [
      [{ partition: 'q-404', from: 'n1', to: 'n2', origin: 'operator' }, 'unknown_partition', /q-404 does not exist/],
      [{ partition: 'q-1', from: p.followers[0]!, to: 'n99', origin: 'operator' }, 'unknown_node', /n99 is not in the cluster/],
      [{ partition: 'q-1', from: p.followers[0]!, to: p.followers[1]!, origin: 'operator' }, 'already_a_replica', /already holds a copy/],
      [{ partition: 'q-1', from: p.owner, to: outsider, origin: 'operator' }, 'not_a_follower', /owns q-1/],
      [{ partition: 'q-1', from: outsider, to: outsider, origin: 'operator' }, 'same_node', /a move needs two different nodes/],
      [{ partition: 's-0', from: 'n2', to: 'n5', origin: 'operator' }, 'not_a_queue', /is a stream/],
    ];
    for (const [request, code, message] of cases) {
      const err = await startFollowerMove(ctx, request).then(() => null, (e: unknown) => e);
      expect(err, JSON.stringify(request)).toBeInstanceOf(MoveRefused);
      expect((err as MoveRefused).code).toBe(code);
      expect((err as MoveRefused).message).toMatch(message);
    }
    await cluster.client.fault({ fault: 'crash-node', node: outsider });
    const down = await startFollowerMove(ctx, { partition: 'q-1', from: p.followers[0]!, to: outsider, origin: 'operator' }).catch((e: unknown) => e);
    expect((down as MoveRefused).code).toBe('node_down');
    await cluster.client.fault({ fault: 'restart-node', node: outsider });
    expect((await partition('q-1')).generation).toBe(generation);
  });

  it('refuses a second move on the same partition and names the running one', async () => {
    const id = 'q-2';
    const { from, to, handle: first, release } = await startHeldMove(id, 'operator');
    const other = (await cluster.client.topology()).nodes.find((n) => n.id !== to && n.id !== from && !(n.id in {}))!;
    const err = await startFollowerMove(ctx, { partition: id, from, to: other.id, origin: 'operator' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MoveRefused);
    expect((err as MoveRefused).message).toMatch(new RegExp(`already running: workflow reconfigure-${id} \\(follower-move ${from} -> ${to}, phase catching_up\\)`));

    // Operator cancel before the swap: the learner is dropped, nothing counted changed.
    const before = await partition(id);
    await cancelMove(client, id, 'test cancel');
    expect(await first.result()).toMatchObject({ status: 'cancelled', reason: 'test cancel' });
    const after = await partition(id);
    expect(after.learners).not.toContain(to);
    expect(after.history.map((h) => h.node)).not.toContain(to);
    expect(after.followers).toEqual(before.followers);
    expect(after.writeRequirement).toBe(before.writeRequirement);
    await release();
  });

  it('reports a stalled learner in plain words, then aborts cleanly before the swap', async () => {
    const id = 'q-3';
    const { from, to, handle, release } = await startHeldMove(id, 'operator', { stallReportMs: 500, stallAbortMs: 4_000, pollMs: 500 });
    const stalled = await eventually('a stalled blocking reason', async () => {
      const s = await statusOf(id);
      return s.blockingReason?.includes('stalled') ? s : undefined;
    });
    expect(stalled.blockingReason).toMatch(new RegExp(`${to} is stalled: no progress for \\d+s`));
    expect(await handle.result()).toMatchObject({ status: 'aborted', code: 'stalled' });
    const after = await partition(id);
    expect(after.learners).toEqual([]);
    expect(after.followers).toContain(from);
    await release();
  });

  it('drops the learner and ends with a clear reason when T fails before the swap', async () => {
    const id = 'q-4';
    const { from, to, handle, release } = await startHeldMove(id, 'operator');
    await cluster.client.fault({ fault: 'crash-node', node: to });
    expect(await handle.result()).toMatchObject({ status: 'aborted', code: 'target_down', reason: expect.stringMatching(/failed before the swap/) });
    const after = await partition(id);
    expect(after.learners).toEqual([]);
    expect(after.followers).toContain(from);
    await cluster.client.fault({ fault: 'restart-node', node: to });
    await release();
  });

  it('a recovery before the swap: an operator move waits for activation and retries under the new epoch', async () => {
    const id = 'q-5';
    const { from, to, handle, release } = await startHeldMove(id, 'operator');
    const before = await partition(id);
    await cluster.client.fault({ fault: 'fail-owner', partition: id });
    await untilPhase(id, ['waiting_for_recovery', 'catching_up', 'swapping', 'covering_boundary', 'removing', 'completed']);
    await release();
    const outcome = await handle.result();
    const after = await partition(id);
    expect(after.epoch).toBe(before.epoch + 1);
    if (after.owner === from) {
      // The recovery chose R as the new owner: a follower move of R no longer applies.
      expect(outcome).toMatchObject({ status: 'aborted' });
      expect(after.learners).toEqual([]);
    } else {
      expect(outcome).toMatchObject({ status: 'completed', epoch: before.epoch + 1 });
      expect(after.followers).toContain(to);
      expect(after.history.map((h) => h.node)).not.toContain(from);
      expect((await statusOf(id)).retries).toBeGreaterThanOrEqual(1);
    }
    await replayAndKeep(client, handle.workflowId, 'recovery-before-swap');
  });

  it('a recovery before the swap ends a planner move; the learner is dropped after activation', async () => {
    const id = 'q-1';
    const { handle, release } = await startHeldMove(id, 'planner');
    const before = await partition(id);
    await cluster.client.fault({ fault: 'fail-owner', partition: id });
    expect(await handle.result()).toMatchObject({ status: 'aborted', code: 'pending_recovery' });
    const after = await partition(id);
    expect(after.pendingRecovery).toBeNull();
    expect(after.epoch).toBe(before.epoch + 1);
    expect(after.learners).toEqual([]);
    await release();
  });

  it('completes when the broker drops every event of the move: the workflow re-reads on its poll timer', async () => {
    const id = 'q-0';
    const { from, to } = await pickMove(cluster.client, id);
    await cluster.client.fault({ fault: 'drop-events', count: 1_000_000 });
    try {
      const handle = await startFollowerMove(ctx, { partition: id, from, to, origin: 'operator', timing: { pollMs: 300 } });
      expect(await handle.result()).toMatchObject({ status: 'completed', from, to });
    } finally {
      await cluster.client.fault({ fault: 'drop-events', count: 0 });
    }
  });

  it('a cancel from the Temporal UI or API before the swap is an operator cancel: the learner is dropped', async () => {
    const id = 'q-4';
    const { from, to, handle, release } = await startHeldMove(id, 'operator');
    await handle.cancel();
    expect(await handle.result()).toMatchObject({ status: 'cancelled', reason: 'cancelled through Temporal' });
    const after = await partition(id);
    expect(after.learners).not.toContain(to);
    expect(after.followers).toContain(from);
    await release();
  });

  it('aborts before the swap when T does not catch up within the time allowed for its bytes', async () => {
    const id = 'q-5';
    const { from, to, handle, release } = await startHeldMove(id, 'operator', {
      pollMs: 300,
      catchUpBaseMs: 1_500,
      catchUpFloorBytesPerSec: 1e12,
      stallAbortMs: 600_000,
    });
    const outcome = await handle.result();
    expect(outcome).toMatchObject({ status: 'aborted', code: 'catch_up_timeout' });
    expect(outcome.status === 'aborted' && outcome.reason).toMatch(new RegExp(`${to} did not catch up within the time allowed for \\d`));
    const after = await partition(id);
    expect(after.learners).toEqual([]);
    expect(after.followers).toContain(from);
    await release();
  });
});
