/**
 * Self-healing end to end: a real Temporal dev server, a reference cluster over HTTP and the project's worker
 * with its relay and loop, the loop's REBALANCER_REPLACE_AFTER_MS shortened through its settings. A node that
 * returns within the timeout keeps its copies; one down past it, or lost for good (crashed with its disk lost,
 * also while a drain of another node runs), has every follower copy replaced by the loop on its own, with zero
 * invariant breaches. Partitions q-500..q-511 only.
 */
import type { Client } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../client/cli';
import { drainOutcome, rebalancerStatus, startDrain } from '../../operations/rebalancer';
import type { Partition, Topology } from '../../cluster/contract';
import { DEFAULT_PLANNER_CONFIG } from '../../planner';
import { relayScope } from '../../operations/relay';
import { createRebalancerWorker, type RebalancerWorker } from '../../worker/worker';
import type { RebalancerSettings, RebalancerStatus } from '../../rules/definitions';
import { holders } from '../../rules/rebalancer-rules';
import { closedPort, connectClient, eventually, logger, startTestCluster, temporalAddress, temporalEnv, temporalNamespace, TEST_RELAY_TUNING, withEnv, type TestCluster } from './helpers';
import { startAdmin, type RunningAdmin } from '../../admin/server';
import { createAdminDeps } from '../../admin/wiring';
import { AuditLog } from '../../operations/audit';

const taskQueue = `repair-${process.pid}`;
const REPLACE_AFTER_MS = 15_000;
const SETTINGS: RebalancerSettings = {
  planner: {
    ...DEFAULT_PLANNER_CONFIG,
    maxTransfersPerNode: 2,
    maxTransfersPerCluster: 4,
    nodeCooldownMs: 1_000,
    partitionCooldownMs: 2_000,
    // Wide, so the loop's balancing leaves this file's layout alone and only repairs and the drain move copies.
    threshold: 0.5,
    replaceAfterMs: REPLACE_AFTER_MS,
  },
  tickMs: 500,
  ticksPerRun: 20,
};

let cluster: TestCluster;
let client: Client;
let w: RebalancerWorker;
let running: Promise<void>;
let scope: string;
let audit: AuditLog;
let admin: RunningAdmin;

beforeAll(async () => {
  cluster = await startTestCluster({ recoveryDelayMs: 1_000 }, { nodes: 0, partitions: 0, streams: 0 });
  for (const id of ['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7']) await cluster.client.joinNode(id, 1, 'z1');
  for (let i = 0; i < 12; i++) {
    const replicas = [0, 1, 2].map((k) => `n${((i + k) % 7) + 1}`);
    await cluster.client.createPartition({ id: `q-${500 + i}`, replicas });
  }
  client = await connectClient();
  w = await createRebalancerWorker({
    temporal: { address: temporalAddress(), namespace: temporalNamespace(), taskQueue },
    clusterUrl: cluster.url,
    logger,
    relayTuning: TEST_RELAY_TUNING,
    rebalancer: SETTINGS,
  });
  running = w.run();
  scope = relayScope(cluster.url, taskQueue);
  // `status` reads the broker whole unless a test names the admin service started here.
  Object.assign(process.env, { ...temporalEnv(), CLUSTER_URL: cluster.url, TEMPORAL_TASK_QUEUE: taskQueue, ADMIN_URL: `http://127.0.0.1:${await closedPort()}` });
  audit = new AuditLog(null);
  admin = await startAdmin({
    deps: createAdminDeps({ client, cluster: cluster.client, taskQueue, planner: SETTINGS.planner }),
    audit,
    token: 'repair-test-token-0123456789',
    host: '127.0.0.1',
    port: 0,
    temporalUiUrl: 'http://127.0.0.1:8233',
    namespace: temporalNamespace(),
  });
});

async function cli(...argv: string[]): Promise<string> {
  let out = '';
  expect(await runCli(argv, { out: (t) => void (out += t), err: () => undefined })).toBe(0);
  return out;
}

afterAll(async () => {
  await admin?.close();
  audit?.close();
  if (w) {
    await client.workflow.getHandle(w.rebalancerWorkflowId!).terminate('test file done').catch(() => undefined);
    w.shutdown();
    await running;
  }
  await cluster?.close();
});

afterEach(async () => {
  expect((await cluster.client.invariants()).breaches).toEqual([]);
});

const status = (): Promise<RebalancerStatus> => rebalancerStatus(client, scope);
const repairsStarted = async (): Promise<number> => (await status()).startedByOp?.follower_replace ?? 0;

/** Partitions with a follower copy on `node`. */
const followedBy = (t: Topology, node: string): Partition[] => t.partitions.filter((p) => p.followers.includes(node));

/** Every partition holds its replication factor in counted copies on live nodes, nothing in flight, none on `gone`. */
function healed(t: Topology, gone: string[]): string | null {
  const live = new Set(t.nodes.filter((n) => n.live).map((n) => n.id));
  for (const p of t.partitions) {
    const on = holders(p).filter((n) => gone.includes(n));
    if (on.length > 0) return `${p.id} still has a copy on ${on.join(', ')}`;
    const counted = [p.owner, ...p.followers].filter((n) => live.has(n) && !p.history.some((h) => h.node === n && h.suspended));
    if (counted.length < p.replicationFactor) return `${p.id} has ${counted.length} of ${p.replicationFactor} copies live`;
    if (p.learners.length > 0 || p.leaving !== null || p.pendingRecovery !== null) return `${p.id} has a change in flight`;
  }
  return null;
}

async function untilHealed(what: string, gone: string[], timeoutMs = 150_000): Promise<Topology> {
  return eventually(
    what,
    async () => {
      const t = await cluster.client.topology();
      const problem = healed(t, gone);
      if (problem === null) return t;
      const s = await status();
      throw new Error(`${problem}; ${s.inFlight.length} in flight; last plan: ${s.lastPlan?.idleReason ?? 'started moves'}`);
    },
    timeoutMs,
  );
}

describe('self-healing', () => {
  it('a node that returns within the timeout is not replaced: its copies rejoin', async () => {
    const held = followedBy(await cluster.client.topology(), 'n3').map((p) => p.id);
    expect(held.length).toBeGreaterThan(0);
    await cluster.client.fault({ fault: 'crash-node', node: 'n3' });
    const crashed = Date.now();
    const ticks = (await status()).ticks;
    // Down for well under the timeout, while the loop ticks a few times (the recovery of what n3 owned activates meanwhile).
    await eventually('the loop ticks while n3 is down', async () => ((await status()).ticks >= ticks + 3 ? true : undefined), REPLACE_AFTER_MS / 2);
    await new Promise((r) => setTimeout(r, Math.max(0, crashed + REPLACE_AFTER_MS / 2 - Date.now())));
    await cluster.client.fault({ fault: 'restart-node', node: 'n3' });
    await eventually('n3 rejoined every partition', async () => {
      const t = await cluster.client.topology();
      return t.partitions.some((p) => p.history.some((h) => h.node === 'n3' && h.suspended)) ? undefined : t;
    });
    expect(await repairsStarted()).toBe(0);
    const t = await cluster.client.topology();
    // Balancing may move a copy off n3 later; none was replaced as lost.
    expect(t.partitions.filter((p) => holders(p).includes('n3')).length).toBeGreaterThan(0);
  });

  it('a node down past the timeout has every follower copy replaced, by the broker clock, not sooner', async () => {
    await cluster.client.fault({ fault: 'crash-node', node: 'n4' });
    const downSince = (await cluster.client.nodes()).nodes.find((n) => n.id === 'n4')!.downSince!;
    expect(downSince).toEqual(expect.any(Number));
    // Within the timeout (once the recovery of what n4 owned activated) `rebalancer status` names the partitions a
    // copy short, none lost yet.
    await eventually('the recoveries n4 caused to activate', async () =>
      (await cluster.client.topology()).partitions.some((p) => p.pendingRecovery !== null) ? undefined : true,
    );
    type Shown = { underReplicated: { partition: string; lost: unknown[]; repair: unknown }[]; readFrom: { via: string } };
    const shown = JSON.parse(await cli('status', '--json')) as Shown;
    const under = shown.underReplicated;
    expect(shown.readFrom.via).toBe('broker');
    expect(under.map((u) => u.partition).sort()).toEqual(followedBy(await cluster.client.topology(), 'n4').map((p) => p.id).sort());
    expect(under.every((u) => u.lost.length === 0 && u.repair === null)).toBe(true);
    // Through the admin service (`npm start` runs one): the same partitions, computed from its model of the broker, and
    // the loop's status asked by the service, so the CLI needs no Temporal client of its own.
    const through = JSON.parse(await withEnv({ ADMIN_URL: admin.url, TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}` }, () => cli('status', '--json'))) as Shown;
    expect(through.readFrom.via).toBe('admin');
    expect(through.underReplicated).toEqual(under);
    expect(await cli('status')).toMatch(/under-replicated: \d+ partition\(s\)[\s\S]*2\/3 +a copy is down, within the repair timeout/);
    let firstRepairSeenAt: number | null = null;
    const t = await eventually(
      'n4 replaced everywhere',
      async () => {
        const s = await status();
        const repair = s.inFlight.find((m) => m.op === 'follower_replace');
        if (repair && firstRepairSeenAt === null) firstRepairSeenAt = repair.startedAt;
        const topo = await cluster.client.topology();
        const problem = healed(topo, ['n4']);
        if (problem === null) return topo;
        throw new Error(`${problem}; ${s.inFlight.length} in flight; last plan: ${s.lastPlan?.idleReason ?? 'started moves'}; skipped ${JSON.stringify(s.lastPlan?.skipped ?? [])}`);
      },
      150_000,
    );
    expect(followedBy(t, 'n4')).toEqual([]);
    expect(await repairsStarted()).toBeGreaterThan(0);
    // The loop's clock and the broker's wall clock are this machine's: the first repair began past the timeout.
    expect(firstRepairSeenAt).not.toBeNull();
    expect(firstRepairSeenAt!).toBeGreaterThanOrEqual(downSince + REPLACE_AFTER_MS - 1_000);
  });

  it('a node lost for good (crash, disk lost) while a drain of another node runs: the drain completes and every copy is replaced', async () => {
    const before = await cluster.client.topology();
    expect(followedBy(before, 'n2').length + before.partitions.filter((p) => p.owner === 'n2').length).toBeGreaterThan(0);
    const repairs = await repairsStarted();
    await cluster.client.fault({ fault: 'crash-node', node: 'n2' });
    await cluster.client.fault({ fault: 'lose-disk', node: 'n2' });
    const handle = await startDrain({ client, cluster: cluster.client, taskQueue }, { node: 'n1', by: 'test', reason: 'decommission while n2 is lost', settings: SETTINGS });
    expect(await drainOutcome(handle)).toEqual({ status: 'completed', node: 'n1', moves: expect.any(Number) });
    const t = await untilHealed('every copy on n1 and n2 replaced', ['n1', 'n2']);
    expect(t.partitions.filter((p) => holders(p).some((n) => n === 'n1' || n === 'n2'))).toEqual([]);
    expect(await repairsStarted()).toBeGreaterThan(repairs);
  });
});
