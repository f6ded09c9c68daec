/**
 * Drains end to end: a real Temporal dev server, a reference cluster over HTTP (partitions q-450..q-469 and the
 * stream s-450 only: workflow ids are shared by every test file on the dev server) and the project's worker with
 * its relay. No rebalancer loop runs here, so every move is the drain's.
 */
import type { Client } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { runCli } from '../../client/cli';
import { MoveRefused } from '../../operations/moves';
import { drainOutcomeLine } from '../../client/commands/drain';
import { drainOutcome, drainStatus, startDrain, undrain } from '../../operations/rebalancer';
import { DEFAULT_PLANNER_CONFIG } from '../../planner';
import { holders } from '../../rules/rebalancer-rules';
import { drainStatusQuery, type DrainStatus, type RebalancerSettings } from '../../rules/definitions';
import { connectClient, copiesOn, eventually, replayAndKeep, startTestCluster, startWorker, temporalEnv, type TestCluster } from './helpers';

const taskQueue = `drain-${process.pid}`;
const settings: RebalancerSettings = {
  planner: { ...DEFAULT_PLANNER_CONFIG, maxTransfersPerNode: 2, maxTransfersPerCluster: 4, nodeCooldownMs: 0 },
  tickMs: 500,
  ticksPerRun: 20,
};

let cluster: TestCluster;
let client: Client;
let stopWorker: () => Promise<void>;
const ctx = () => ({ client, cluster: cluster.client, taskQueue });

async function launchWorker(): Promise<void> {
  const { w, running } = await startWorker(cluster.url, taskQueue);
  stopWorker = async () => {
    w.shutdown();
    await running;
  };
}

beforeAll(async () => {
  cluster = await startTestCluster({}, { nodes: 0, partitions: 0, streams: 0 });
  for (const id of ['n1', 'n2', 'n3', 'n4', 'n5']) await cluster.client.joinNode(id, 1, 'z1');
  // n1 owns q-450..q-453, follows q-454..q-457 and holds no copy of q-458.
  const layouts = [
    ...[0, 1, 2, 3].map((i) => ['n1', `n${2 + (i % 4)}`, `n${2 + ((i + 1) % 4)}`]),
    ...[0, 1, 2, 3].map((i) => [`n${2 + (i % 4)}`, 'n1', `n${2 + ((i + 1) % 4)}`]),
    ['n2', 'n3', 'n4'],
  ];
  for (const [i, replicas] of layouts.entries()) await cluster.client.createPartition({ id: `q-${450 + i}`, replicas });
  client = await connectClient();
  await launchWorker();
  Object.assign(process.env, { ...temporalEnv(), CLUSTER_URL: cluster.url, TEMPORAL_TASK_QUEUE: taskQueue });
});

afterAll(async () => {
  await stopWorker?.();
  await cluster?.close();
});

afterEach(async () => {
  expect((await cluster.client.invariants()).breaches).toEqual([]);
});

async function refusal(promise: Promise<unknown>): Promise<MoveRefused> {
  const err = await promise.catch((e: unknown) => e);
  expect(err).toBeInstanceOf(MoveRefused);
  return err as MoveRefused;
}

describe('drain', () => {
  it('refuses an unknown node and a node whose copies have nowhere to go, before anything is written', async () => {
    const unknown = await refusal(startDrain(ctx(), { node: 'n9', by: 'test', reason: 'x', settings }));
    expect(unknown).toMatchObject({ code: 'unknown_node', message: 'node n9 is not in the cluster; its nodes are n1, n2, n3, n4, n5' });

    // A partition on every node: none is left to take n1's copy of it.
    await cluster.client.createPartition({ id: 'q-469', replicas: ['n2', 'n1', 'n3', 'n4', 'n5'] });
    try {
      const full = await refusal(startDrain(ctx(), { node: 'n1', by: 'test', reason: 'x', settings }));
      expect(full.code).toBe('not_enough_room');
      expect(full.message).toMatch(/^the other nodes cannot hold every copy on n1: 1 of its 9 copies have nowhere to go/);
    } finally {
      await cluster.client.deletePartition('q-469');
    }
    let out = '';
    const code = await runCli(['drain', 'n9', '--json'], { out: (t) => void (out += t), err: () => undefined });
    expect(code).toBe(1);
    expect(JSON.parse(out)).toMatchObject({ ok: false, code: 'unknown_node' });
    const nodes = (await cluster.client.topology()).nodes;
    expect(nodes.every((n) => !n.draining)).toBe(true);
    await expect(client.workflow.getHandle('drain-n1').describe()).rejects.toThrow();
  });

  it('empties a node owning and following many partitions: handoffs first, then follower moves, across a worker restart', async () => {
    expect(await copiesOn(cluster.client, 'n1')).toHaveLength(8);
    const handle = await startDrain(ctx(), { node: 'n1', by: 'alice', reason: 'decommission', settings });
    const seen: DrainStatus[] = [];
    const outcome = drainOutcome(handle);
    let done = false;
    let restarted = false;
    void outcome.finally(() => (done = true));
    while (!done) {
      const s = await handle.query(drainStatusQuery).catch(() => null);
      if (s) seen.push(s);
      // Once the handoffs are done, the worker stops and another takes over: the drain goes on where it was.
      if (s?.phase === 'moving_followers' && !restarted) {
        restarted = true;
        await stopWorker();
        await launchWorker();
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(restarted).toBe(true);
    expect(await outcome).toEqual({ status: 'completed', node: 'n1', moves: expect.any(Number) });
    expect(await copiesOn(cluster.client, 'n1')).toEqual([]);
    const n1 = (await cluster.client.topology()).nodes.find((n) => n.id === 'n1')!;
    expect(n1.draining).toBe(true);

    const final = await drainStatus(client, 'n1');
    expect(final).toMatchObject({ phase: 'completed', partitionsLeft: 0, ownedLeft: 0, bytesLeft: 0, by: 'alice', reason: 'decommission', blockingReasons: [] });
    expect(final.moves.completed).toBeGreaterThanOrEqual(12);
    // Progress went down as it went; every handoff came before the first follower move off n1.
    const left = seen.map((s) => s.partitionsLeft).filter((n): n is number => n !== null);
    expect(left[0]).toBe(8);
    for (let i = 1; i < left.length; i++) expect(left[i]!).toBeLessThanOrEqual(left[i - 1]!);
    const phases = seen.map((s) => s.phase);
    expect(phases.lastIndexOf('handing_off')).toBeLessThan(phases.indexOf('moving_followers'));
    for (const s of seen.filter((x) => x.phase === 'handing_off')) expect(s.inFlight.filter((m) => m.op === 'follower_move')).toEqual([]);

    await replayAndKeep(client, handle.workflowId, 'drain-started-follower-move-v3');
    expect(await undrain({ client, cluster: cluster.client }, 'n1', 'back in service')).toBeNull();
    expect((await cluster.client.topology()).nodes.find((n) => n.id === 'n1')!.draining).toBe(false);
  });

  it('undrain cancels a drain: no new move starts, the move in flight ends, the mark is cleared', async () => {
    const before = await copiesOn(cluster.client, 'n2');
    // Every copy a move off n2 could add is stalled before the drain starts, so the first move is still catching up
    // when the cancel comes: stalling it once seen raced its whole move on a loaded machine.
    const t = await cluster.client.topology();
    const stalls = t.partitions
      .filter((p) => before.includes(p.id))
      .flatMap((p) => t.nodes.filter((n) => !holders(p).includes(n.id)).map((n) => ({ partition: p.id, node: n.id })));
    const stall = (stalled: boolean) => Promise.all(stalls.map((s) => cluster.client.fault({ fault: 'stall-transfer', ...s, stalled })));
    await stall(true);
    onTestFinished(() => stall(false).then(() => undefined));
    // One move at a time, so the drain is cancelled with most of n2 still on it.
    const oneAtATime = { ...settings, planner: { ...settings.planner, maxTransfersPerNode: 1, maxTransfersPerCluster: 1 } };
    const handle = await startDrain(ctx(), { node: 'n2', by: 'bob', reason: 'maybe', settings: oneAtATime });
    await eventually('a move off n2 catching up', async () => {
      const s = await handle.query(drainStatusQuery);
      const m = s.inFlight[0];
      if (!m || m.op !== 'follower_move') return undefined;
      const p = (await cluster.client.partition(m.partition)).partition;
      return p.learners.includes(m.to) ? m : undefined;
    });
    const undrained = undrain({ client, cluster: cluster.client }, 'n2', 'not now');
    const finishing = await eventually('the drain waiting for its moves', async () => {
      const s = await drainStatus(client, 'n2');
      if (s.phase === 'finishing_moves' && s.blockingReasons.length > 0) return s;
      throw new Error(`phase ${s.phase}, blocked on ${s.blockingReasons.join('; ') || '-'}, ${s.inFlight.length} in flight`);
    });
    expect(finishing.blockingReasons[0]).toMatch(/waiting for .*reconfigure-q-4\d\d.* to end/);
    const started = finishing.moves.started;
    await stall(false);
    const outcome = await undrained;
    expect(outcome).toMatchObject({ status: 'cancelled', node: 'n2' });
    const final = await drainStatus(client, 'n2');
    expect(final.moves.started).toBe(started);
    expect(final.inFlight).toEqual([]);
    expect((await cluster.client.topology()).nodes.find((n) => n.id === 'n2')!.draining).toBe(false);
    expect((await copiesOn(cluster.client, 'n2')).length).toBeGreaterThanOrEqual(before.length - final.moves.completed);
    expect((await copiesOn(cluster.client, 'n2')).length).toBeGreaterThan(0);
    await replayAndKeep(client, handle.workflowId, 'drain-cancelled');
  });

  it('empties a node that went down: recovery moves what it owned, the drain moves every copy off it', async () => {
    expect((await copiesOn(cluster.client, 'n3')).length).toBeGreaterThan(0);
    await cluster.client.fault({ fault: 'crash-node', node: 'n3' });
    const handle = await startDrain(ctx(), { node: 'n3', by: 'carol', reason: 'n3 died', settings });
    expect(await drainOutcome(handle)).toEqual({ status: 'completed', node: 'n3', moves: expect.any(Number) });
    expect(await copiesOn(cluster.client, 'n3')).toEqual([]);
    const t = await cluster.client.topology();
    expect(t.partitions.filter((p) => p.pendingRecovery !== null)).toEqual([]);
    for (const p of t.partitions) expect(p.followers.length + 1, p.id).toBe(p.replicationFactor);
  });

  it('refuses a node holding a stream copy up front, changing nothing; drained of its queues only, it ends listing the streams left', async () => {
    // s-450 is a stream: nothing may move it yet, so a drain of n5 could never end.
    await cluster.client.createPartition({ id: 's-450', kind: 'stream', replicas: ['n2', 'n5', 'n4'] });
    const queues = (await copiesOn(cluster.client, 'n5')).filter((id) => id !== 's-450');
    expect(queues.length).toBeGreaterThan(0);
    const refused = await refusal(startDrain(ctx(), { node: 'n5', by: 'test', reason: 'x', settings }));
    expect(refused.code).toBe('unmovable_copies');
    expect(refused.message).toMatch(/^n5 holds a copy of the stream s-450, which cannot move \(streams need their own seal and selection path\), so the drain could never end; drain with --queues-only/);
    let out = '';
    let err = '';
    const code = await runCli(['drain', 'n5', '--reason', 'decommission'], { out: (t) => void (out += t), err: (t) => void (err += t) });
    expect(code).toBe(1);
    expect(err).toBe(`refused (unmovable_copies): ${refused.message}\n`);
    out = '';
    expect(await runCli(['drain', 'n5', '--json'], { out: (t) => void (out += t), err: () => undefined })).toBe(1);
    expect(JSON.parse(out)).toEqual({ ok: false, code: 'unmovable_copies', message: refused.message });
    expect((await cluster.client.topology()).nodes.find((n) => n.id === 'n5')!.draining).toBe(false);
    await expect(client.workflow.getHandle('drain-n5').describe()).rejects.toThrow();
    expect((await copiesOn(cluster.client, 'n5')).sort()).toEqual([...queues, 's-450'].sort());

    const handle = await startDrain(ctx(), { node: 'n5', by: 'dana', reason: 'queues off n5', queuesOnly: true, settings });
    const outcome = await drainOutcome(handle);
    expect(outcome).toEqual({ status: 'completed', node: 'n5', moves: expect.any(Number), streamsLeft: ['s-450'] });
    expect(drainOutcomeLine(outcome!)).toMatch(/^completed: n5 holds no queue copy \(\d+ moves\); stream copies left on it: s-450$/);
    expect(await copiesOn(cluster.client, 'n5')).toEqual(['s-450']);
    const final = await drainStatus(client, 'n5');
    expect(final).toMatchObject({ phase: 'completed', queuesOnly: true, partitionsLeft: 0, ownedLeft: 0, bytesLeft: 0, streamsLeft: ['s-450'], blockingReasons: [] });
    expect(final.moves.completed).toBeGreaterThanOrEqual(queues.length);
    await replayAndKeep(client, handle.workflowId, 'drain-queues-only');
    await undrain({ client, cluster: cluster.client }, 'n5', 'back in service');
  });

  it('says plainly when it waits on something that does not pass by itself, and goes on once that is fixed', async () => {
    // n4 owns q-460, whose only follower n2 goes down: no admitted follower can take the owner role until n2 is back.
    await cluster.client.createPartition({ id: 'q-460', replicas: ['n4', 'n2'] });
    await cluster.client.fault({ fault: 'crash-node', node: 'n2' });
    const handle = await startDrain(ctx(), { node: 'n4', by: 'erin', reason: 'retire n4', queuesOnly: true, settings });
    const stuck = await eventually('the drain to say q-460 waits for good', async () => {
      const s = await handle.query(drainStatusQuery);
      return s.blockingReasons.find((r) => r.startsWith('q-460: ')) && s.ownedLeft === 1 ? s : undefined;
    });
    expect(stuck.phase).toBe('handing_off');
    expect(stuck.blockingReasons.find((r) => r.startsWith('q-460: '))).toMatch(/^q-460: .*; this does not pass by itself: .*bring n2 back/);
    await cluster.client.fault({ fault: 'restart-node', node: 'n2' });
    expect(await drainOutcome(handle)).toEqual({ status: 'completed', node: 'n4', moves: expect.any(Number), streamsLeft: ['s-450'] });
    expect(await copiesOn(cluster.client, 'n4')).toEqual(['s-450']);
    await undrain({ client, cluster: cluster.client }, 'n4', 'back in service');
  });
});
