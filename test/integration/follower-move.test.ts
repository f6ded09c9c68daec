/**
 * The follower move end to end: real Temporal dev server, real reference cluster over HTTP, the project's
 * worker and relay. Each test asserts the final assignment, the outcome and zero invariant breaches.
 */
import type { Client } from '@temporalio/client';
import { NativeConnection, Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createActivities, type ActivityDeps } from '../../activities';
import { MoveRefused, cancelMove, showMove, startFollowerMove, type MovesContext } from '../../operations/moves';
import { ClusterHttpError } from '../../cluster/client';
import type { Partition, WriteReply } from '../../cluster/contract';
import { WORKFLOWS_PATH } from '../../worker/worker';
import { nodeSignal, statusQuery, type MoveStatus, type MoveTiming } from '../../rules/definitions';
import { eventually, outcomeOf, pickMove, replayAndKeep, startSuite, startTestCluster, startWorker, temporalAddress, temporalNamespace, type TestCluster } from './helpers';

let cluster: TestCluster;
let client: Client;
let ctx: MovesContext;
let stop: (() => Promise<void>) | undefined;
const taskQueue = `moves-${process.pid}`;

beforeAll(async () => {
  ({ cluster, client, ctx, stop } = await startSuite(taskQueue));
});

afterAll(async () => {
  await stop?.();
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
async function startHeldMove(id: string, origin: 'operator' | 'planner', timing: Partial<MoveTiming> = { pollMs: 500 }, queue = taskQueue) {
  const { from, to } = await pickMove(cluster.client, id);
  await cluster.client.fault({ fault: 'stall-transfer', partition: id, node: to, stalled: true });
  const handle = await startFollowerMove({ ...ctx, taskQueue: queue }, { partition: id, from, to, origin, timing });
  await untilPhase(id, ['catching_up']);
  const release = () => cluster.client.fault({ fault: 'stall-transfer', partition: id, node: to, stalled: false });
  return { from, to, handle, release };
}

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;
/**
 * A worker without a relay of its own, on its own task queue, whose activities use `broker`: a test can stop
 * it (so signals queue up in the history) or make the broker answer what the test needs.
 */
async function startBareWorker(queue: string, broker: ActivityDeps['cluster']): Promise<() => Promise<void>> {
  bundle ??= bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH });
  const connection = await NativeConnection.connect({ address: temporalAddress() });
  const worker = await Worker.create({ connection, namespace: temporalNamespace(), taskQueue: queue, workflowBundle: await bundle, activities: createActivities({ cluster: broker }) });
  const running = worker.run();
  return async () => {
    worker.shutdown();
    await running;
    await connection.close();
  };
}

/** The test cluster's client, counting when `id`'s partition was read and how many times every node was. */
function countingBroker(id: string): { broker: ActivityDeps['cluster']; partitionReads: number[]; nodesReads: () => number } {
  const partitionReads: number[] = [];
  let nodesReads = 0;
  const broker: ActivityDeps['cluster'] = {
    partition: (p) => {
      if (p === id) partitionReads.push(Date.now());
      return cluster.client.partition(p);
    },
    nodes: () => {
      nodesReads++;
      return cluster.client.nodes();
    },
    write: cluster.client.write.bind(cluster.client),
  };
  return { broker, partitionReads, nodesReads: () => nodesReads };
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
    const outcome = await outcomeOf(handle);
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
    // The memo carries the outcome, so a list of ended moves or the loop reads no history to learn it.
    expect((await handle.describe()).memo?.['outcome']).toEqual(outcome);
    // Its type folded the step library's patches: no marker, no TemporalChangeVersion upsert (16 events a move).
    const events = (await handle.fetchHistory()).events ?? [];
    expect(events.filter((e) => e.markerRecordedEventAttributes).length).toBe(0);
    expect(events.filter((e) => e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields?.['TemporalChangeVersion']).length).toBe(0);
    await replayAndKeep(client, handle.workflowId, 'v3-happy-path');
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
    expect(await outcomeOf(first)).toMatchObject({ status: 'cancelled', reason: 'test cancel' });
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
    expect(await outcomeOf(handle)).toMatchObject({ status: 'aborted', code: 'stalled' });
    const after = await partition(id);
    expect(after.learners).toEqual([]);
    expect(after.followers).toContain(from);
    await release();
  });

  it('drops the learner and ends with a clear reason when T fails before the swap', async () => {
    const id = 'q-4';
    const { from, to, handle, release } = await startHeldMove(id, 'operator');
    await cluster.client.fault({ fault: 'crash-node', node: to });
    expect(await outcomeOf(handle)).toMatchObject({ status: 'aborted', code: 'target_down', reason: expect.stringMatching(/failed before the swap/) });
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
    const other = before.followers.find((f) => f !== from)!;
    // Recovery makes the most durable survivor owner (ties broken by name): hold R's replication back so the
    // other follower wins and R is still a follower when the move tries again.
    await cluster.client.fault({ fault: 'stall-transfer', partition: id, node: from, stalled: true });
    await eventually('R behind the other follower', async () => {
      const { progress } = await cluster.client.partition(id);
      const durable = (n: string) => progress.replicas.find((r) => r.node === n)!.durableOffset;
      return durable(from) < durable(other) ? true : undefined;
    });
    await cluster.client.fault({ fault: 'fail-owner', partition: id });
    await untilPhase(id, ['waiting_for_recovery']);
    const activated = await eventually('the activation', async () => {
      const p = await partition(id);
      return p.epoch === before.epoch + 1 ? p : undefined;
    });
    expect(activated.owner).toBe(other);
    expect(activated.followers).toContain(from);
    await cluster.client.fault({ fault: 'stall-transfer', partition: id, node: from, stalled: false });
    await release();

    expect(await outcomeOf(handle)).toMatchObject({ status: 'completed', from, to, epoch: before.epoch + 1 });
    const after = await partition(id);
    expect(after.followers).toContain(to);
    expect(after.history.map((h) => h.node)).not.toContain(from);
    expect(after.learners).toEqual([]);
    expect((await statusOf(id)).retries).toBeGreaterThanOrEqual(1);
    await replayAndKeep(client, handle.workflowId, 'v3-recovery-retried');
  });

  it('a recovery before the swap ends a planner move; the learner is dropped after activation', async () => {
    const id = 'q-1';
    const { handle, release } = await startHeldMove(id, 'planner');
    const before = await partition(id);
    await cluster.client.fault({ fault: 'fail-owner', partition: id });
    expect(await outcomeOf(handle)).toMatchObject({ status: 'aborted', code: 'pending_recovery' });
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
      expect(await outcomeOf(handle)).toMatchObject({ status: 'completed', from, to });
    } finally {
      await cluster.client.fault({ fault: 'drop-events', count: 0 });
    }
  });

  it('a cancel from the Temporal UI or API before the swap is an operator cancel: the learner is dropped', async () => {
    const id = 'q-4';
    const { from, to, handle, release } = await startHeldMove(id, 'operator');
    await handle.cancel();
    expect(await outcomeOf(handle)).toMatchObject({ status: 'cancelled', reason: 'cancelled through Temporal' });
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
    const outcome = await outcomeOf(handle);
    expect(outcome).toMatchObject({ status: 'aborted', code: 'catch_up_timeout' });
    expect(outcome.status === 'aborted' && outcome.reason).toMatch(new RegExp(`${to} did not catch up within the time allowed for \\d`));
    const after = await partition(id);
    expect(after.learners).toEqual([]);
    expect(after.followers).toContain(from);
    await release();
  });

  it('applies node signals in feed order: a node_up older than the node_down seen leaves T down', async () => {
    const id = 'q-2';
    const queue = `${taskQueue}-seq`;
    let stop = await startBareWorker(queue, cluster.client);
    const { to, handle, release } = await startHeldMove(id, 'operator', { pollMs: 500, stallAbortMs: 30_000 }, queue);
    try {
      // With no worker on the queue both signals wait in the history and reach the workflow in one activation,
      // in this order: the relay sends node events concurrently, so a quick restart can arrive like this.
      await stop();
      await handle.signal(nodeSignal, { node: to, live: false, seq: 20 });
      await handle.signal(nodeSignal, { node: to, live: true, seq: 19 });
      stop = await startBareWorker(queue, cluster.client);
      expect(await outcomeOf(handle)).toMatchObject({ status: 'aborted', code: 'target_down' });
      expect((await partition(id)).learners).toEqual([]);
    } finally {
      await stop();
      await release();
    }
  });

  it("spaces a long wait's polls out: each re-read doubles the delay to the next, up to four polls apart", async () => {
    const id = 'q-1';
    const queue = `${taskQueue}-backoff`;
    const pollMs = 1_000;
    const { broker, partitionReads: reads } = countingBroker(id);
    const stop = await startBareWorker(queue, broker);
    const { to, handle, release } = await startHeldMove(id, 'operator', { pollMs, stallAbortMs: 600_000 }, queue);
    try {
      const since = Date.now();
      await new Promise((r) => setTimeout(r, 17_000));
      const polls = reads.filter((t) => t >= since);
      const gaps = polls.slice(1).map((t, i) => t - polls[i]!);
      // Every 1 s without the backoff (16 or more); 1, 2, 4, 4, 4 s with it; 1, 2, 4, 8 s without its cap.
      expect(polls.length, `reads at ${polls.map((t) => t - since).join(', ')} ms`).toBeGreaterThanOrEqual(3);
      expect(polls.length, `reads at ${polls.map((t) => t - since).join(', ')} ms`).toBeLessThanOrEqual(7);
      expect(Math.max(...gaps)).toBeLessThan(4 * pollMs + 1_500);
      expect(gaps.at(-1)).toBeGreaterThan(3 * pollMs);
      await release();
      expect(await outcomeOf(handle)).toMatchObject({ status: 'completed', to });
      await replayAndKeep(client, handle.workflowId, 'v3-poll-backs-off');
    } finally {
      await stop();
      await release();
    }
  });

  it("a wait's poll reads the partition alone, whose progress says which of its nodes are live: no read of every node", async () => {
    const id = 'q-1';
    const queue = `${taskQueue}-partition-polls`;
    const { broker, partitionReads, nodesReads } = countingBroker(id);
    const stop = await startBareWorker(queue, broker);
    const { to, handle, release } = await startHeldMove(id, 'operator', { pollMs: 500, stallAbortMs: 600_000 }, queue);
    try {
      const before = { partition: partitionReads.length, nodes: nodesReads() };
      await eventually('two polls of the held move', async () => (partitionReads.length - before.partition >= 2 ? true : undefined));
      // Each poll read every node before (the patch): at 1,000 nodes about 170 KB in the move's history each time.
      expect(nodesReads() - before.nodes).toBe(0);
      await release();
      expect(await outcomeOf(handle)).toMatchObject({ status: 'completed', to });
      await replayAndKeep(client, handle.workflowId, 'v3-poll-reads-the-partition');
    } finally {
      await stop();
      await release();
    }
  });

  it('drops the learner when the broker rejects a read for good while T catches up', async () => {
    const id = 'q-3';
    const queue = `${taskQueue}-reject`;
    let reject = false;
    let rejected = 0;
    const broker: ActivityDeps['cluster'] = {
      partition: async (p) => {
        if (reject && p === id) {
          reject = false;
          rejected++;
          throw new ClusterHttpError(400, 'GET', `/v1/partitions/${p}`, { error: 'bad_request', message: 'injected: this read is rejected' });
        }
        return cluster.client.partition(p);
      },
      nodes: () => cluster.client.nodes(),
      write: cluster.client.write.bind(cluster.client),
    };
    const stop = await startBareWorker(queue, broker);
    const { to, handle, release } = await startHeldMove(id, 'operator', { pollMs: 300 }, queue);
    try {
      reject = true;
      const outcome = await outcomeOf(handle);
      expect(rejected).toBe(1);
      expect(outcome).toMatchObject({
        status: 'aborted',
        code: 'BrokerRejected',
        reason: expect.stringMatching(/rejected a request while catching up: .*injected: this read is rejected.*the learner was dropped before the swap/),
      });
      expect((await partition(id)).learners).toEqual([]);
      expect((await cluster.client.syncBudget()).transfers.filter((t) => t.partition === id || t.node === to)).toEqual([]);
    } finally {
      await stop();
      await release();
    }
  });

  it('keeps an admission the relay signals before the add-learner reply is taken in: no wait for the poll timer', async () => {
    const id = 'q-4';
    const queue = `${taskQueue}-early-admission`;
    const { from, to } = await pickMove(cluster.client, id);
    let held = 0;
    const broker: ActivityDeps['cluster'] = {
      partition: (p) => cluster.client.partition(p),
      nodes: () => cluster.client.nodes(),
      write: async (p, write, request) => {
        const reply = await cluster.client.write(p, write, request);
        if (p === id && write === 'add-learner' && reply.ok) {
          // The reply comes back only once the learner is admitted and the relay has told the move so.
          held++;
          await eventually(`${to} admitted to ${id}`, async () => ((await partition(id)).history.some((h) => h.node === to) ? true : undefined));
          await new Promise((r) => setTimeout(r, 2_000));
        }
        return reply;
      },
    };
    const stop = await startBareWorker(queue, broker);
    try {
      const started = Date.now();
      // A poll a minute apart: a move that lost the admission would read it only then.
      const handle = await startFollowerMove({ ...ctx, taskQueue: queue }, { partition: id, from, to, origin: 'operator', timing: { pollMs: 60_000 } });
      expect(await outcomeOf(handle)).toMatchObject({ status: 'completed' });
      expect(held).toBe(1);
      expect(Date.now() - started).toBeLessThan(30_000);
      expect((await partition(id)).followers).toContain(to);
      await replayAndKeep(client, handle.workflowId, 'v3-admission-kept');
    } finally {
      await stop();
    }
  });

  it('a removal refused for a recovery, its reply taken in after the activation: the move waits for no other recovery', async () => {
    const id = 'q-2';
    const queue = `${taskQueue}-late-refusal`;
    const { from, to } = await pickMove(cluster.client, id);
    const epochs: number[] = [];
    const broker: ActivityDeps['cluster'] = {
      partition: (p) => cluster.client.partition(p),
      nodes: () => cluster.client.nodes(),
      write: async (p, write, request) => {
        if (p !== id || write !== 'remove-leaving' || epochs.length > 0) return cluster.client.write(p, write, request);
        // The owner fails as the removal is sent; its refusal comes back only once the recovery has activated
        // and the relay has told the move (as when a reply is lost and the retry returns the first one).
        const failed = (await partition(id)).epoch;
        await cluster.client.fault({ fault: 'fail-owner', partition: id });
        const reply = await cluster.client.write(p, write, request);
        epochs.push(failed);
        await eventually('the activation', async () => ((await partition(id)).epoch > failed ? true : undefined));
        await new Promise((r) => setTimeout(r, 2_000));
        return reply;
      },
    };
    const stop = await startBareWorker(queue, broker);
    try {
      const handle = await startFollowerMove({ ...ctx, taskQueue: queue }, { partition: id, from, to, origin: 'operator', timing: { pollMs: 500, retryMs: 200 } });
      const outcome = await Promise.race([outcomeOf(handle), new Promise<MoveStatus>((r) => setTimeout(() => void statusOf(id).then(r), 20_000))]);
      expect(epochs).toHaveLength(1);
      expect(outcome).toMatchObject({ status: 'completed', from, to, epoch: epochs[0]! + 1 });
      const after = await partition(id);
      // T counts: as a follower, or as the owner the recovery chose.
      expect([after.owner, ...after.followers]).toContain(to);
      expect(after.history.map((h) => h.node)).not.toContain(from);
      await replayAndKeep(client, handle.workflowId, 'v3-recovery-refusal-after-activation');
    } finally {
      await stop();
    }
  });

  it.each([
    ['refuses the removal for a reason that cannot pass', 'q-1', 'unknown_node'],
    ['rejects the removal request for good (a 4xx)', 'q-0', 'BrokerRejected'],
  ])('ends with the code when the broker %s, R still leaving and eligible', async (_how, id, code) => {
    const queue = `${taskQueue}-final-${id}`;
    let refused = 0;
    const broker: ActivityDeps['cluster'] = {
      partition: (p) => cluster.client.partition(p),
      nodes: () => cluster.client.nodes(),
      write: async (p, write, request) => {
        if (p !== id || write !== 'remove-leaving') return cluster.client.write(p, write, request);
        refused++;
        if (code === 'BrokerRejected') {
          throw new ClusterHttpError(400, 'POST', `/v1/partitions/${p}/${write}`, { error: 'bad_request', message: 'injected: this write is rejected' });
        }
        const reply: WriteReply = { ok: false, write, refusal: { code: 'unknown_node', message: 'injected: the broker does not know this node', saw: {} } };
        return reply;
      },
    };
    const stop = await startBareWorker(queue, broker);
    try {
      const { from, to } = await pickMove(cluster.client, id);
      const handle = await startFollowerMove({ ...ctx, taskQueue: queue }, { partition: id, from, to, origin: 'operator', timing: { pollMs: 300, retryMs: 200 } });
      const outcome = await Promise.race([outcomeOf(handle), new Promise<'still running'>((r) => setTimeout(() => r('still running'), 30_000))]);
      expect(outcome).toMatchObject({
        status: 'aborted',
        code,
        reason: expect.stringMatching(new RegExp(`${from} stays leaving, eligible and keeps its data.*remove ${from} with the guarded write remove-leaving`)),
      });
      expect(refused).toBe(1);
      const p = await partition(id);
      expect(p.leaving).toBe(from);
      expect(p.history.map((h) => h.node)).toContain(from);
      expect(p.followers).toContain(to);
      // The way out the reason names: the operator removes R with the guarded write.
      const done = await cluster.client.write(id, 'remove-leaving', { node: from, expectedGeneration: p.generation, idempotencyKey: `test-${id}-remove` });
      expect(done.ok).toBe(true);
    } finally {
      await stop();
    }
  });
});

describe('follower move on a cluster of its own', () => {
  it('a checkpoint that takes longer than the stall abort, with bytes falling, is not stalled: the move completes', async () => {
    // Transfers at 250 kB/s: T copies a 1 MiB checkpoint for about 4 s, its durable offset flat meanwhile.
    const slow = await startTestCluster({ transferBytesPerSec: 250_000 }, { nodes: 5, partitions: 8, streams: 0 });
    const queue = `${taskQueue}-slow`;
    const { w, running } = await startWorker(slow.url, queue);
    try {
      // q-7: an id the file's other cluster does not have, so its relay never signals this move.
      const id = 'q-7';
      const { from, to } = await pickMove(slow.client, id);
      const timing = { stallReportMs: 500, stallAbortMs: 1_500, pollMs: 300 };
      const handle = await startFollowerMove({ client, cluster: slow.client, taskQueue: queue }, { partition: id, from, to, origin: 'operator', timing });
      // T's progress while it copies a checkpoint, sampled from the broker.
      const samples: { at: number; durable: number; bytes: number }[] = [];
      let done = false;
      const watching = (async () => {
        while (!done) {
          const t = (await slow.client.progress(id)).replicas.find((r) => r.node === to && r.phase === 'checkpoint');
          if (t) samples.push({ at: Date.now(), durable: t.durableOffset, bytes: t.bytesRemaining });
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      const outcome = await outcomeOf(handle);
      done = true;
      await watching;
      expect(outcome).toMatchObject({ status: 'completed', from, to });
      // The scene happened: T's durable offset stayed flat for longer than the stall abort while bytes fell.
      const flat = samples.filter((x) => x.durable === samples[0]?.durable);
      expect(flat.length).toBeGreaterThan(2);
      expect(flat.at(-1)!.at - flat[0]!.at).toBeGreaterThan(timing.stallAbortMs + 1_000);
      expect(flat.at(-1)!.bytes).toBeLessThan(flat[0]!.bytes);
      expect((await slow.client.invariants()).breaches).toEqual([]);
    } finally {
      w.shutdown();
      await running;
      await slow.close();
    }
  });

  it('time paused for recovery does not count toward the catch-up deadline, and the move says it is paused', async () => {
    // One transfer per node: a rejoin on T can only start by pausing the move's transfer to T.
    const own = await startTestCluster({ perNodeLimit: 1 }, { nodes: 5, partitions: 12, streams: 0 });
    const queue = `${taskQueue}-paused`;
    const { w, running } = await startWorker(own.url, queue);
    try {
      // Ids q-6 and up, which the file's other cluster does not have. B: a partition T owns; A: one T holds no copy of.
      const { partitions } = await own.client.topology();
      const mine = partitions.filter((p) => Number(p.id.slice(2)) >= 6);
      const holds = (p: Partition, n: string) => [p.owner, ...p.followers].includes(n);
      const [A, B] = mine.flatMap((a) => mine.filter((b) => b !== a && !holds(a, b.owner)).map((b) => [a, b] as const))[0]!;
      const T = B.owner;
      const R = A.followers[0]!;
      const timing = { pollMs: 300, catchUpBaseMs: 4_000, catchUpFloorBytesPerSec: 1e12, stallAbortMs: 600_000 };
      await own.client.fault({ fault: 'stall-transfer', partition: A.id, node: T, stalled: true });
      const handle = await startFollowerMove({ client, cluster: own.client, taskQueue: queue }, { partition: A.id, from: R, to: T, origin: 'operator', timing });
      await eventually('the move catching up', async () => ((await handle.query(statusQuery)).phase === 'catching_up' ? true : undefined));
      // B's owner T fails and is suspended; its rejoin is held (stalled), so it keeps T's one slot.
      await own.client.fault({ fault: 'stall-transfer', partition: B.id, node: T, stalled: true });
      await own.client.fault({ fault: 'fail-owner', partition: B.id });
      await eventually('the broker pausing the transfer to T', async () => {
        const t = (await own.client.progress(A.id)).replicas.find((r) => r.node === T);
        return t?.pausedForRecovery ? true : undefined;
      });
      await own.client.fault({ fault: 'stall-transfer', partition: A.id, node: T, stalled: false });
      const reason = `transfer to ${T} paused: recovery transfers on ${T} come first`;
      const paused = await eventually('the move paused for recovery, or ended', async () => {
        const s = await handle.query(statusQuery);
        return s.blockingReason?.startsWith(reason) || s.outcome !== null ? s : undefined;
      });
      expect(paused).toMatchObject({ phase: 'catching_up', outcome: null });
      expect(paused.blockingReason).toMatch(new RegExp(`^${reason} \\(.* remaining`));
      // Paused for longer than the whole catch-up allowance.
      const pausedAt = Date.now();
      await new Promise((r) => setTimeout(r, timing.catchUpBaseMs + 2_000));
      const still = (await own.client.progress(A.id)).replicas.find((r) => r.node === T)!;
      expect(still.pausedForRecovery).toBe(true);
      await own.client.fault({ fault: 'stall-transfer', partition: B.id, node: T, stalled: false });
      expect(await outcomeOf(handle)).toMatchObject({ status: 'completed', from: R, to: T });
      expect(Date.now() - pausedAt).toBeGreaterThan(timing.catchUpBaseMs);
      expect((await own.client.invariants()).breaches).toEqual([]);
    } finally {
      w.shutdown();
      await running;
      await own.close();
    }
  });
});
