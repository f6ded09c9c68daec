/**
 * Pins and exclusions end to end: a real Temporal dev server, a reference cluster over HTTP (partitions
 * q-600..q-611 only), the project's worker with its relay and loop, the CLI and the admin API. A pinned partition
 * and an excluded node are left alone by the loop across a worker restart while it balances the rest; unknown ids
 * are refused naming them and change nothing; a drain and an operator's move go ahead and say so.
 */
import type { Client } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AuditLog } from '../../operations/audit';
import { startAdmin, type RunningAdmin } from '../../admin/server';
import { createAdminDeps } from '../../admin/wiring';
import { drainStatus, rebalancerStatus, setPaused } from '../../operations/rebalancer';
import type { Partition } from '../../cluster/contract';
import { DEFAULT_PLANNER_CONFIG } from '../../planner';
import { relayScope } from '../../operations/relay';
import { createRebalancerWorker, type RebalancerWorker } from '../../worker/worker';
import type { RebalancerSettings, RebalancerStatus } from '../../rules/definitions';
import { call, TOKEN } from './admin-fixture';
import { cli, connectClient, copiesOn, counted, eventually, logger, loopRunId, replayAndKeep, startTestCluster, stopLoopWorker, temporalAddress, temporalEnv, temporalNamespace, TEST_RELAY_TUNING, type TestCluster } from './helpers';

const taskQueue = `pin-${process.pid}`;
const SETTINGS: RebalancerSettings = {
  planner: { ...DEFAULT_PLANNER_CONFIG, maxTransfersPerNode: 2, maxTransfersPerCluster: 4, nodeCooldownMs: 1_000, partitionCooldownMs: 2_000 },
  tickMs: 500,
  // Small, so the loop continues as new during the file and carries its pins across.
  ticksPerRun: 10,
};
const PINNED = 'q-600';

let cluster: TestCluster;
let client: Client;
let w: RebalancerWorker;
let running: Promise<void>;
let scope: string;
let audit: AuditLog;
let admin: RunningAdmin;

async function startLoopWorker(): Promise<void> {
  w = await createRebalancerWorker({ temporal: { address: temporalAddress(), namespace: temporalNamespace(), taskQueue }, clusterUrl: cluster.url, logger, relayTuning: TEST_RELAY_TUNING, rebalancer: SETTINGS });
  running = w.run();
}

beforeAll(async () => {
  cluster = await startTestCluster({}, { nodes: 0, partitions: 0, streams: 0 });
  for (const id of ['n1', 'n2', 'n3']) await cluster.client.joinNode(id, 1, 'z1');
  for (let i = 0; i < 12; i++) await cluster.client.createPartition({ id: `q-${600 + i}`, replicas: [0, 1, 2].map((k) => `n${((i + k) % 3) + 1}`) });
  client = await connectClient();
  await startLoopWorker();
  scope = relayScope(cluster.url, taskQueue);
  Object.assign(process.env, { ...temporalEnv(), CLUSTER_URL: cluster.url, TEMPORAL_TASK_QUEUE: taskQueue });
  audit = new AuditLog(null);
  const deps = createAdminDeps({ client, cluster: cluster.client, taskQueue, planner: SETTINGS.planner });
  admin = await startAdmin({ deps, audit, token: TOKEN, host: '127.0.0.1', port: 0, temporalUiUrl: 'http://127.0.0.1:8233', namespace: temporalNamespace() });
});

afterAll(async () => {
  await admin?.close();
  audit?.close();
  if (w) await stopLoopWorker(client, w, running);
  await cluster?.close();
});

afterEach(async () => {
  expect((await cluster.client.invariants()).breaches).toEqual([]);
});

const status = (): Promise<RebalancerStatus> => rebalancerStatus(client, scope);

/** Every reconfiguration Temporal has a record of that matches the visibility query, by workflow id. */
async function reconfigurations(query: string): Promise<string[]> {
  const found: string[] = [];
  for await (const wf of client.workflow.list({ query: `WorkflowId STARTS_WITH "reconfigure-" AND (${query})` })) found.push(`${wf.workflowId} ${wf.status.name}`);
  return found;
}

/** Nothing in flight on the broker or in the loop, and the loop's last tick started nothing. */
async function atRest(what: string, ready: (s: RebalancerStatus) => Promise<boolean>, timeoutMs = 150_000): Promise<RebalancerStatus> {
  return eventually(
    what,
    async () => {
      const [t, s] = await Promise.all([cluster.client.topology(), status()]);
      const busy = t.partitions.filter((p) => p.learners.length > 0 || p.leaving || p.admission === 'closed').map((p) => p.id);
      if (busy.length === 0 && s.inFlight.length === 0 && s.lastPlan?.idleReason && (await ready(s))) return s;
      throw new Error(`busy ${busy.join(',') || '-'}; ${s.inFlight.length} in flight; last plan: ${s.lastPlan?.idleReason ?? 'started moves'}`);
    },
    timeoutMs,
  );
}

describe('pin and exclude', () => {
  let pinnedBefore: Partition;

  it('a pinned partition and an excluded node are left alone across a worker restart while the loop balances the rest', async () => {
    await setPaused(client, scope, true, { by: 'test', reason: 'set up pins before the nodes are balanced' });
    await cluster.client.joinNode('n4', 1, 'z1');
    await cluster.client.joinNode('n5', 1, 'z1');
    pinnedBefore = (await cluster.client.partition(PINNED)).partition;

    const pinned = await cli('pin', PINNED, '--reason', 'consumer audit', '--by', 'alice', '--json');
    expect(pinned.code).toBe(0);
    expect(JSON.parse(pinned.out)).toMatchObject({ pinned: { [PINNED]: { by: 'alice', reason: 'consumer audit' } } });
    const excluded = await cli('exclude', 'n5', '--reason', 'burn-in of new disks', '--by', 'alice');
    expect(excluded).toMatchObject({ code: 0, out: 'excluded n5 by alice: burn-in of new disks; the rebalancer leaves it alone until `rebalancer include n5`\n' });
    const holdingRun = await loopRunId(client, w);
    const again = await cli('pin', PINNED, '--reason', 'twice', '--json');
    expect(again.code).toBe(1);
    expect(JSON.parse(again.out)).toMatchObject({ ok: false, code: 'pin_refused', message: `${PINNED} is already pinned by alice (consumer audit); unpin it first` });

    // A new worker: the pins live in the loop's state, not in the worker.
    w.shutdown();
    await running;
    await startLoopWorker();
    const ticks = (await status()).ticks;
    await setPaused(client, scope, false, { by: 'test', reason: 'pins set' });
    const planningRun = await loopRunId(client, w);

    // At rest, the idle reason names what holds the loop back: n5 is below the mean only because it is excluded.
    const excludedBlocks = /n5 is [\d.]+ below the mean but excluded by alice: burn-in of new disks/;
    const rest = await atRest(
      'the loop at rest with n4 filled around the pin and the exclusion',
      async (s) => s.ticks > ticks + 3 && excludedBlocks.test(s.lastPlan!.idleReason!) && (await copiesOn(cluster.client, 'n4')).length >= 5,
    );
    expect(rest.pinned).toMatchObject({ [PINNED]: { by: 'alice', reason: 'consumer audit' } });
    expect(rest.excluded).toMatchObject({ n5: { by: 'alice', reason: 'burn-in of new disks' } });
    expect(rest.moves.completed).toBeGreaterThanOrEqual(5);
    // The loop continued as new at least once on the way and carried the pins.
    expect(rest.ticks).toBeGreaterThan(SETTINGS.ticksPerRun);

    const after = (await cluster.client.partition(PINNED)).partition;
    expect(counted(after)).toEqual(counted(pinnedBefore));
    expect(after.owner).toBe(pinnedBefore.owner);
    expect(await copiesOn(cluster.client, 'n5')).toEqual([]);
    // Nothing was ever started on the pinned partition or onto or off n5.
    expect(await reconfigurations(`RebalancePartition = "${PINNED}" OR RebalanceSource = "n5" OR RebalanceTarget = "n5"`)).toEqual([]);

    // The run that took the updates and the one that planned around the holds (often one run) replay under the
    // current code; the first is kept.
    await eventually('the planning run to continue as new', async () => ((await loopRunId(client, w)) !== planningRun ? true : undefined));
    await replayAndKeep(client, w.rebalancerWorkflowId!, 'rebalancer-pins-and-exclusions', holdingRun);
    if (planningRun !== holdingRun) await replayAndKeep(client, w.rebalancerWorkflowId!, 'rebalancer-planned-around-pins', planningRun);

    // The dry run plans with the loop's pins and exclusions.
    const dry = JSON.parse((await cli('plan', '--json')).out) as { steps: { partition: string; from: string; to: string }[]; idleReason: string | null };
    expect(dry.steps.filter((x) => x.partition === PINNED || x.from === 'n5' || x.to === 'n5')).toEqual([]);

    const shown = await cli('status');
    expect(shown.out).toMatch(new RegExp(`^pinned: +${PINNED} by alice since \\S+: consumer audit$`, 'm'));
    expect(shown.out).toMatch(/^excluded: +n5 by alice since \S+: burn-in of new disks$/m);
  });

  it('refuses a pin or an exclusion of an unknown id, naming it and what the broker has, and changes nothing', async () => {
    const before = await status();
    const partition = await cli('pin', 'q-999', '--reason', 'typo', '--json');
    expect(partition.code).toBe(1);
    expect(JSON.parse(partition.out)).toMatchObject({ ok: false, code: 'unknown_partition', message: expect.stringMatching(/^unknown partition q-999: the broker has 12 \(q-600, q-601, /) });
    const node = await cli('exclude', 'n99', '--reason', 'typo');
    expect(node.code).toBe(1);
    expect(node.err).toMatch(/^refused \(unknown_node\): unknown node n99: the broker has 5 \(n1, n2, n3, n4, n5\)$/m);
    const notPinned = await cli('unpin', 'q-601', '--reason', 'nothing to lift', '--json');
    expect(JSON.parse(notPinned.out)).toMatchObject({ ok: false, code: 'unpin_refused', message: `q-601 is not pinned: nothing to unpin (pinned: ${PINNED})` });
    const bad = await cli('pin', 'Q 1', '--reason', 'x');
    expect(bad.code).toBe(2);
    const after = await status();
    expect(after.pinned).toEqual(before.pinned);
    expect(after.excluded).toEqual(before.excluded);
  });

  it('the admin API pins, unpins, excludes and includes, audited; unknown ids are refused with 404', async () => {
    const as = { headers: { 'x-operator': 'dana' } };
    const pin = await call(admin.url, 'POST', '/api/pin', { ...as, body: { partition: 'q-601', reason: 'hot consumer' } });
    expect(pin.status).toBe(200);
    expect(pin.body.pinned).toEqual(expect.arrayContaining([expect.objectContaining({ id: 'q-601', by: 'dana', reason: 'hot consumer' })]));
    const twice = await call(admin.url, 'POST', '/api/pin', { ...as, body: { partition: 'q-601', reason: 'again' } });
    expect(twice).toMatchObject({ status: 409, body: { error: 'pin_refused', message: 'q-601 is already pinned by dana (hot consumer); unpin it first' } });
    const unknown = await call(admin.url, 'POST', '/api/pin', { ...as, body: { partition: 'q-998', reason: 'typo' } });
    expect(unknown).toMatchObject({ status: 404, body: { error: 'unknown_partition', message: expect.stringMatching(/^unknown partition q-998: the broker has 12 /) } });
    const unknownNode = await call(admin.url, 'POST', '/api/exclude', { ...as, body: { node: 'n98', reason: 'typo' } });
    expect(unknownNode).toMatchObject({ status: 404, body: { error: 'unknown_node', message: expect.stringMatching(/^unknown node n98 \(node\): the broker has 5 /) } });
    const noReason = await call(admin.url, 'POST', '/api/exclude', { ...as, body: { node: 'n4', reason: ' ' } });
    expect(noReason.status).toBe(400);
    const noToken = await call(admin.url, 'POST', '/api/unpin', { token: false, body: { partition: 'q-601', reason: 'x' } });
    expect(noToken.status).toBe(401);

    const shown = (await call(admin.url, 'GET', '/api/status', { token: false })).body.rebalancer as { pinned: { id: string }[]; excluded: { id: string; since: string }[] };
    expect(shown.pinned.map((h) => h.id).sort()).toEqual([PINNED, 'q-601']);
    expect(shown.excluded).toEqual([expect.objectContaining({ id: 'n5', by: 'alice', since: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) })]);

    expect((await call(admin.url, 'POST', '/api/unpin', { ...as, body: { partition: 'q-601', reason: 'cooled off' } })).status).toBe(200);
    const excluded = await call(admin.url, 'POST', '/api/exclude', { ...as, body: { node: 'n4', reason: 'flaky nic' } });
    expect(excluded.body.excluded).toEqual(expect.arrayContaining([expect.objectContaining({ id: 'n4', by: 'dana' })]));
    expect((await call(admin.url, 'POST', '/api/include', { ...as, body: { node: 'n4', reason: 'nic replaced' } })).status).toBe(200);
    const s = await status();
    expect(Object.keys(s.pinned)).toEqual([PINNED]);
    expect(Object.keys(s.excluded)).toEqual(['n5']);

    const entries = audit.list({ limit: 20 }).filter((e) => e.actor === 'dana');
    expect(entries.map((e) => `${e.action} ${e.target}: ${e.outcome.replace(/:.*/, '')}`).reverse()).toEqual([
      'pin q-601: ok',
      'pin q-601: refused (pin_refused)',
      'unpin q-601: ok',
      'exclude n4: ok',
      'include n4: ok',
    ]);
    const openapi = (await call(admin.url, 'GET', '/openapi.json', { token: false })).body as { paths: Record<string, unknown> };
    for (const p of ['/api/pin', '/api/unpin', '/api/exclude', '/api/include']) expect(openapi.paths[p]).toBeDefined();
  });

  it('a drain of an excluded node and an operator move of a pinned partition go ahead and say so', async () => {
    const drained = await cli('drain', 'n5', '--wait', '--reason', 'retire the burn-in node');
    expect(drained.code).toBe(0);
    expect(drained.out).toMatch(/^note: n5 is excluded from rebalancing by alice \(burn-in of new disks\): the drain moves every copy off n5 as asked$/m);
    expect(drained.out).toMatch(/^completed: n5 holds no copy/m);
    expect((await drainStatus(client, 'n5')).notice).toMatch(/^note: n5 is excluded from rebalancing/);
    expect((await cli('undrain', 'n5', '--reason', 'back to burn-in')).code).toBe(0);

    const from = pinnedBefore.followers[0]!;
    const moved = await cli('move', PINNED, '--from', from, '--to', 'n4', '--wait', '--reason', 'the audit needs a copy on n4');
    expect(moved.code).toBe(0);
    expect(moved.out).toMatch(new RegExp(`^note: ${PINNED} is pinned by alice \\(consumer audit\\): the rebalancer leaves it alone, but an operator's request goes ahead$`, 'm'));
    expect(counted((await cluster.client.partition(PINNED)).partition)).toContain('n4');
  });

  it('once unpinned and included, the loop moves the partition and fills the node again', async () => {
    expect((await cli('unpin', PINNED, '--reason', 'audit done')).out).toBe(`unpinned ${PINNED}: the rebalancer may move it again\n`);
    expect((await cli('include', 'n5', '--reason', 'burn-in done')).code).toBe(0);
    const s = await atRest('the loop filling n5 after its include', async () => (await copiesOn(cluster.client, 'n5')).length >= 4);
    expect(s.pinned).toEqual({});
    expect(s.excluded).toEqual({});
  });
});
