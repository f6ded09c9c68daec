/**
 * The CLI as a new user meets it, run in-process against the real dev server and a reference cluster: exit
 * codes, --json for refusals and bad usage, unreachable servers, `show` without a move, moves refused up front,
 * --wait's lines, ended moves in `moves`, score vectors in `nodes`, --version, --help with examples, a move's whole life through the CLI
 * (started with a reason, listed, watched, shown, cancelled) and how cancelled and aborted moves read afterwards.
 */
import fs from 'node:fs';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../client/cli';
import { startAdmin } from '../../admin/server';
import { createAdminDeps } from '../../admin/wiring';
import { AuditLog } from '../../operations/audit';
import { loadEnv, rebalancerSettings } from '../../worker/config';
import { buildCli } from '../../client/cli';
import { closedPort, connectClient, eventually, pickMove, startTestCluster, startWorker, temporalEnv, temporalNamespace, withEnv, type TestCluster } from './helpers';

let cluster: TestCluster;
let client: Client;
let stopWorker: () => Promise<void>;
const taskQueue = `cli-${process.pid}`;

beforeAll(async () => {
  // No recovery activates during this file, so a failed owner leaves its partition with a pending recovery.
  // Workflow ids are `reconfigure-<partition>` on the dev server all test files share: this file moves only
  // q-100 and up, which no other file's cluster has.
  cluster = await startTestCluster({ recoveryDelayMs: 3_600_000 }, { nodes: 6, partitions: 110, streams: 1 });
  client = await connectClient();
  const { w, running } = await startWorker(cluster.url, taskQueue);
  stopWorker = async () => {
    w.shutdown();
    await running;
  };
  // No admin service answers unless a test starts one: `status` and `nodes` read the broker whole.
  Object.assign(process.env, { ...temporalEnv(), CLUSTER_URL: cluster.url, TEMPORAL_TASK_QUEUE: taskQueue, ADMIN_URL: `http://127.0.0.1:${await closedPort()}` });
});

afterAll(async () => {
  await stopWorker?.();
  await cluster?.close();
});

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (t) => void (out += t), err: (t) => void (err += t) });
  return { code, out, err };
}

/** Runs `moves --watch` (not on a terminal) until `enough(output)`, then stops it as Ctrl-C would. */
async function watchUntil(enough: (out: string) => boolean, ...argv: string[]): Promise<{ code: number; out: string }> {
  const stop = new AbortController();
  let out = '';
  const running = runCli(['moves', '--watch', ...argv], {
    out: (t) => {
      out += t;
      if (enough(out)) stop.abort();
    },
    err: (t) => void (out += t),
    signal: stop.signal,
  });
  const timer = setTimeout(() => stop.abort(), 60_000);
  const code = await running;
  clearTimeout(timer);
  return { code, out };
}

/** A move of `partition` started through the CLI whose learner cannot copy, so it waits in catching_up. */
async function heldMove(partition: string, reason: string) {
  const { from, to } = await pickMove(cluster.client, partition);
  await cluster.client.fault({ fault: 'stall-transfer', partition, node: to, stalled: true });
  const started = await cli('move', partition, '--from', from, '--to', to, '--reason', reason, '--json');
  expect(started.code, started.err).toBe(0);
  expect(json(started.out)).toEqual({ started: true, workflowId: `reconfigure-${partition}`, kind: 'follower-move', partition, from, to });
  await eventually(`${partition} catching up`, async () => {
    const shown = JSON.parse((await cli('show', partition, '--json')).out) as { status?: { phase: string } };
    return shown.status?.phase === 'catching_up' ? true : undefined;
  });
  return { from, to };
}

/** An admin service for `queue` (this file's task queue, or another's) on a free port, and how to stop it. */
async function adminFor(queue: string): Promise<{ url: string; close: () => Promise<void> }> {
  const { planner } = rebalancerSettings(loadEnv());
  const audit = new AuditLog(null);
  const admin = await startAdmin({ deps: createAdminDeps({ client, cluster: cluster.client, taskQueue: queue, planner }), audit, token: 'cli-test-token-0123456789', host: '127.0.0.1', port: 0, temporalUiUrl: 'http://127.0.0.1:8233', namespace: temporalNamespace() });
  return {
    url: admin.url,
    close: async () => {
      await admin.close();
      audit.close();
    },
  };
}

/** stdout of a --json run must be exactly one JSON object. */
function json(out: string): Record<string, unknown> {
  expect(out.trim().split('\n')).toHaveLength(1);
  return JSON.parse(out) as Record<string, unknown>;
}

async function workflowExists(partition: string): Promise<boolean> {
  return client.workflow.getHandle(`reconfigure-${partition}`).describe().then(() => true, () => false);
}

describe('rebalancer CLI', () => {
  it('--version prints the package version', async () => {
    const { version } = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    const r = await cli('--version');
    expect(r).toMatchObject({ code: 0, out: `${version}\n` });
  });

  it('a refusal with --json prints one JSON object on stdout and exits 1', async () => {
    const r = await cli('move', 'q-100', '--from', 'n1', '--to', 'n1', '--json');
    expect(r.code).toBe(1);
    expect(json(r.out)).toMatchObject({ ok: false, code: 'same_node', message: expect.stringContaining('n1') });
    expect(r.err).toMatch(/refused \(same_node\)/);
  });

  it('an unreachable server exits 3, naming the server and the variable to check', async () => {
    const temporal = await withEnv({ TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}` }, () => cli('moves', '--json'));
    expect(temporal.code).toBe(3);
    expect(json(temporal.out)).toMatchObject({ ok: false, code: 'unreachable', message: expect.stringMatching(/Temporal server .*TEMPORAL_ADDRESS/) });

    const { from, to } = await pickMove(cluster.client, 'q-101');
    const broker = await withEnv({ CLUSTER_URL: `http://127.0.0.1:${await closedPort()}` }, () => cli('move', 'q-101', '--from', from, '--to', to));
    expect(broker.code).toBe(3);
    expect(broker.err).toMatch(/cannot reach the broker .*CLUSTER_URL/);
    expect(await workflowExists('q-101')).toBe(false);
  });

  it('show tells a partition that never moved from an unknown one', async () => {
    const never = await cli('show', 'q-103');
    expect(never.code).toBe(1);
    expect(never.err).toContain('no move has run on q-103');
    expect(json((await cli('show', 'q-103', '--json')).out)).toMatchObject({ ok: false, code: 'no_move' });

    const unknown = await cli('show', 'q-9999', '--json');
    expect(unknown.code).toBe(1);
    const body = json(unknown.out);
    expect(body).toMatchObject({ ok: false, code: 'unknown_partition' });
    expect(body.message).toMatch(/partition q-9999 is unknown .*\/v1\/topology/);
  });

  it('a move that cannot start is refused up front, naming what is in flight, and starts no workflow', async () => {
    const refusedOn = async (partition: string) => {
      const { from, to } = await pickMove(cluster.client, partition);
      const r = await cli('move', partition, '--from', from, '--to', to, '--json');
      expect(r.code).toBe(1);
      expect(await workflowExists(partition)).toBe(false);
      return json(r.out);
    };
    const learnerOn = await cluster.client.partition('q-102');
    const holders = new Set([learnerOn.partition.owner, ...learnerOn.partition.followers]);
    const learner = (await cluster.client.topology()).nodes.find((n) => n.live && !holders.has(n.id))!.id;
    const added = await cluster.client.write('q-102', 'add-learner', { expectedGeneration: learnerOn.partition.generation, idempotencyKey: 'cli-test-learner', node: learner });
    expect(added.ok).toBe(true);
    expect(await refusedOn('q-102')).toMatchObject({ code: 'change_in_flight', message: expect.stringContaining(`learner ${learner}`) });

    const closing = await cluster.client.partition('q-104');
    const closed = await cluster.client.write('q-104', 'close-admission', { expectedGeneration: closing.partition.generation, idempotencyKey: 'cli-test-close' });
    expect(closed.ok).toBe(true);
    expect(await refusedOn('q-104')).toMatchObject({ code: 'admission_closed' });

    await cluster.client.fault({ fault: 'fail-owner', partition: 'q-105' });
    expect((await cluster.client.partition('q-105')).partition.pendingRecovery).not.toBeNull();
    expect(await refusedOn('q-105')).toMatchObject({ code: 'pending_recovery' });
  });

  it('move --wait prints a line for every phase and ends with the outcome; moves then lists it as ended', async () => {
    const { from, to } = await pickMove(cluster.client, 'q-100');
    const r = await cli('move', 'q-100', '--from', from, '--to', to, '--wait');
    expect(r.code, r.err).toBe(0);
    const lines = r.out.trim().split('\n');
    const phases = lines.map((l) => l.split(':')[0]);
    for (const phase of ['adding_learner', 'catching_up', 'swapping']) expect(phases).toContain(phase);
    // A T that covers B at the swap is removed by the swap's own activity: no covering or removing phase then.
    expect(phases.includes('covering_boundary')).toBe(phases.includes('removing'));
    expect(lines.filter((l) => l.startsWith('completed'))).toEqual([lines.at(-1)]);
    expect(lines.at(-1)).toMatch(new RegExp(`^completed: q-100 ${from} -> ${to}, boundary B \\d+, epoch \\d+$`));

    const listed = await cli('moves', '--json');
    expect(listed.code).toBe(0);
    const { ended } = json(listed.out) as { ended: { partition: string; from: string; to: string; outcome: { status: string } }[] };
    expect(ended).toContainEqual(expect.objectContaining({ partition: 'q-100', from, to, outcome: expect.objectContaining({ status: 'completed' }) }));
    expect((await cli('moves')).out).toMatch(/recently ended:[\s\S]*q-100 .*completed: q-100/);
  });

  it("nodes shows every node's score vector with the mean and the band, as a table and as JSON", async () => {
    const listed = await cli('nodes', '--json');
    expect(listed.code, listed.err).toBe(0);
    const view = json(listed.out) as { nodes: { node: string; owned: number; followed: number; history: number; traffic: number; sync: number; total: number }[]; mean: number; lower: number; upper: number };
    const topology = await cluster.client.topology();
    expect(view.nodes.map((n) => n.node).sort()).toEqual(topology.nodes.map((n) => n.id).sort());
    for (const n of view.nodes) expect(n.owned + n.followed + n.history + n.traffic).toBeGreaterThan(0);
    expect(view.upper - view.mean).toBeCloseTo(0.1);
    expect(view.mean - view.lower).toBeCloseTo(0.1);

    const shown = await cli('nodes');
    expect(shown.code).toBe(0);
    expect(shown.out).toMatch(/^NODE\s+ZONE\s+CAPACITY\s+STATE\s+OWNED\s+FOLLOWED\s+HISTORY\s+TRAFFIC\s+SYNC\s+SCORE/);
    for (const n of topology.nodes) expect(shown.out).toMatch(new RegExp(`^${n.id}\\s+${n.zone}\\s+1\\s+up`, 'm'));
    expect(shown.out).toMatch(/mean \d\.\d{3}, band \d\.\d{3} to \d\.\d{3}, spread \d\.\d{3}/);

    // Each node's replicas, owned partitions, disk and traffic against their bands.
    type Band = { load: number; share: number; low: number; high: number; inside: boolean };
    const banded = view.nodes[0] as unknown as { node: string; bands: { replicas: Band; owned: Band; disk: Band; traffic: Band } };
    expect(Object.keys(banded.bands)).toEqual(['replicas', 'owned', 'disk', 'traffic']);
    const holds = (p: (typeof topology.partitions)[number]) => [p.owner, ...p.followers, ...p.learners, ...(p.leaving === null ? [] : [p.leaving])].includes(banded.node);
    expect(banded.bands.replicas.load).toBe(topology.partitions.filter(holds).length);
    expect(banded.bands.owned.load).toBe(topology.partitions.filter((p) => p.owner === banded.node).length);
    expect(banded.bands.replicas.low).toBeLessThan(banded.bands.replicas.share);
    expect(shown.out).toMatch(/^NODE\s+REPLICAS\s+OWNED\s+DISK\s+TRAFFIC$/m);
    expect(shown.out).toMatch(/bands on n\d+: replicas ± \d+\.\d%, owned ± \d+\.\d%, disk ± \d+\.\d%, traffic ± \d+\.\d%\); (every node inside every band|outside: .+)$/m);
  });

  it('nodes reads through the admin service that shows this broker and task queue, and reads the broker whole otherwise', async () => {
    type View = { nodes: { node: string; bands: { replicas: { load: number }; owned: { load: number } } }[]; mean: number; readFrom: { via: string; url: string } };
    const [own, other] = [await adminFor(taskQueue), await adminFor(`${taskQueue}-other`)];
    try {
      const whole = json((await cli('nodes', '--json')).out) as unknown as View;
      expect(whole.readFrom).toEqual({ via: 'broker', url: cluster.url });
      const through = await withEnv({ ADMIN_URL: own.url }, () => cli('nodes', '--json'));
      expect(through.code, through.err).toBe(0);
      const admin = json(through.out) as unknown as View;
      expect(admin.readFrom).toEqual({ via: 'admin', url: own.url });
      // The same nodes in the same order (by id), each with the same copies: only the moving figures (traffic) may differ.
      const counts = (v: View) => v.nodes.map((n) => [n.node, n.bands.replicas.load, n.bands.owned.load]);
      expect(counts(admin)).toEqual(counts(whole));
      expect(admin.nodes.map((n) => n.node)).toEqual(['n1', 'n2', 'n3', 'n4', 'n5', 'n6']);
      expect((await withEnv({ ADMIN_URL: own.url }, () => cli('nodes'))).out).toMatch(new RegExp(`^topology: through the admin service at ${own.url}$`, 'm'));
      // An admin service of another task queue shows another rebalancer's moves: the CLI reads the broker itself.
      const elsewhere = json((await withEnv({ ADMIN_URL: other.url }, () => cli('nodes', '--json'))).out) as unknown as View;
      expect(elsewhere.readFrom).toEqual({ via: 'broker', url: cluster.url });
    } finally {
      await own.close();
      await other.close();
    }
  });

  it('every command has --help with an example, --json, and --reason when it acts; rebalancer --help documents the exit codes', async () => {
    const top = await cli('--help');
    expect(top.code).toBe(0);
    expect(top.out).toMatch(/Exit status:\s+0\s+done\s+1\s+refused.*\s+2\s+bad usage or configuration\s+3\s+a server/);
    const names = buildCli({ out: () => {}, err: () => {} }).commands.map((c) => c.name());
    for (const name of names) {
      const help = await cli(name, '--help');
      expect(help.code, name).toBe(0);
      expect(help.out, name).toMatch(new RegExp(`Examples?:\\n  \\$ rebalancer ${name}\\b`));
      expect(help.out, name).toContain('--json');
    }
    for (const action of ['move', 'cancel']) expect((await cli(action, '--help')).out).toContain('--reason <text>');
  });

  it('bad usage exits 2 naming the argument and what is expected, as JSON too with --json', async () => {
    const recent = await cli('moves', '--recent', '0', '--json');
    expect(recent.code).toBe(2);
    expect(json(recent.out)).toMatchObject({ ok: false, code: 'bad_usage', message: 'invalid --recent "0": expected a whole number of at least 1' });
    const reason = await cli('cancel', 'q-106', '--reason', ' ', '--json');
    expect(reason.code).toBe(2);
    expect(json(reason.out)).toMatchObject({ ok: false, code: 'bad_usage', message: expect.stringMatching(/invalid --reason for cancel q-106: expected a few words/) });
    const missing = await cli('move', 'q-106', '--to', 'n2', '--json');
    expect(missing.code).toBe(2);
    expect(json(missing.out)).toMatchObject({ ok: false, code: 'bad_usage', message: expect.stringContaining("'--from <node>' not specified") });
    const id = await cli('show', 'not a partition', '--json');
    expect(id.code).toBe(2);
    expect(json(id.out)).toMatchObject({ ok: false, code: 'bad_usage', message: expect.stringContaining('invalid partition "not a partition"') });
  });

  it('a running move through the CLI: its reason reaches the workflow; moves, --watch and show list it; cancel ends it', async () => {
    const partition = 'q-106';
    const { from, to } = await heldMove(partition, 'spread load (cli test)');
    const handle = client.workflow.getHandle(`reconfigure-${partition}`);
    const { events } = await handle.fetchHistory();
    const input = events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!.data!;
    expect(JSON.parse(Buffer.from(input).toString('utf8'))).toMatchObject({ partition, from, to, reason: 'spread load (cli test)' });

    type Listed = { running: { partition: string; kind: string; phase: string }[]; readFrom: { via: string; url: string }; waitedMs: number };
    const listed = await cli('moves', '--json');
    expect(listed.code).toBe(0);
    const { running, readFrom } = json(listed.out) as Listed;
    expect(running).toContainEqual(expect.objectContaining({ partition, kind: 'follower-move', from, to, phase: 'catching_up' }));
    expect(readFrom).toEqual({ via: 'temporal', url: temporalEnv().TEMPORAL_ADDRESS });
    expect((json(listed.out) as Listed).waitedMs).toBe(1_000);
    const row = new RegExp(`${partition} +follower-move +${from}->${to} +catching_up`);
    expect((await cli('moves')).out).toMatch(row);
    // Through the admin service for this broker and task queue: the same move, read from the service's list.
    const [own, other] = [await adminFor(taskQueue), await adminFor(`${taskQueue}-other`)];
    try {
      const through = await withEnv({ ADMIN_URL: own.url }, () => cli('moves', '--json'));
      expect(through.code, through.err).toBe(0);
      const admin = json(through.out) as Listed;
      expect(admin.readFrom).toEqual({ via: 'admin', url: own.url });
      // A move late there shows its last answer: the service's page bound, not a second, unless --wait says.
      expect(admin.waitedMs).toBe(300);
      expect((json((await withEnv({ ADMIN_URL: own.url }, () => cli('moves', '--json', '--wait', '2'))).out) as Listed).waitedMs).toBe(2_000);
      expect(admin.running).toContainEqual(expect.objectContaining({ partition, kind: 'follower-move', from, to, phase: 'catching_up' }));
      const text = (await withEnv({ ADMIN_URL: own.url }, () => cli('moves'))).out;
      expect(text).toMatch(row);
      expect(text).toMatch(new RegExp(`^moves: through the admin service at ${own.url}$`, 'm'));
      // Another task queue's service lists another rebalancer's moves: the CLI asks Temporal itself.
      expect((json((await withEnv({ ADMIN_URL: other.url }, () => cli('moves', '--json'))).out) as Listed).readFrom.via).toBe('temporal');
    } finally {
      await own.close();
      await other.close();
    }

    const line = new RegExp(`^${partition} follower-move ${from}->${to} \\d+% catching_up`, 'm');
    const watched = await watchUntil((out) => line.test(out));
    expect(watched.code).toBe(0);
    expect(watched.out).toMatch(line);
    const watchedJson = await watchUntil((out) => out.includes(`"partition":"${partition}"`), '--json');
    expect(watchedJson.code).toBe(0);
    const first = watchedJson.out.trim().split('\n').map((l) => JSON.parse(l) as { running: { partition: string }[] });
    expect(first.at(-1)!.running).toContainEqual(expect.objectContaining({ partition }));

    const shown = await cli('show', partition);
    expect(shown.out).toMatch(new RegExp(`move: +follower-move ${from} -> ${to} \\(operator\\)[\\s\\S]*phase: +catching_up`));
    // Every value starts in one column, the longest label's ("bytes remaining") included.
    const columns = shown.out.trim().split('\n').map((l) => /^[a-zA-Z ]+: +/.exec(l)![0].length);
    expect(new Set(columns).size, shown.out).toBe(1);

    const cancelled = await cli('cancel', partition, '--reason', 'wrong target', '--json');
    expect(cancelled.code, cancelled.err).toBe(0);
    expect(json(cancelled.out)).toMatchObject({ partition, kind: 'follower-move' });
    await eventually(`${partition} ended`, async () => ((await cli('show', partition, '--json')).out.includes('"running":false') ? true : undefined));
    expect(json((await cli('show', partition, '--json')).out)).toMatchObject({ running: false, outcome: { status: 'cancelled', reason: 'wrong target' } });
    expect((await cli('show', partition)).out).toMatch(/^outcome: +cancelled: wrong target$/m);
    await cluster.client.fault({ fault: 'stall-transfer', partition, node: to, stalled: false });

    // Ended moves leave the live view (other files' moves may be running on the shared server).
    const after = await watchUntil((out) => out.length > 0);
    expect(after.out).not.toMatch(line);
  });

  it('move --from the owner starts an owner move; --via names the follower whose copy goes first', async () => {
    const partition = 'q-108';
    const { partition: p } = await cluster.client.partition(partition);
    const { to } = await pickMove(cluster.client, partition);
    const notOwner = await cli('move', partition, '--from', p.followers[0]!, '--to', to, '--via', p.followers[1]!, '--json');
    expect(notOwner.code).toBe(1);
    expect(json(notOwner.out)).toMatchObject({ ok: false, code: 'not_an_owner_move', message: expect.stringContaining(`${p.owner} is`) });
    expect(await workflowExists(partition)).toBe(false);

    const r = await cli('move', partition, '--from', p.owner, '--to', to, '--via', p.followers[0]!, '--wait');
    expect(r.code, r.out + r.err).toBe(0);
    const lines = r.out.trim().split('\n');
    for (const phase of ['catching_up', 'swapping', 'closing_admission', 'committing_owner']) expect(lines.map((l) => l.split(':')[0])).toContain(phase);
    expect(lines.at(-1)).toMatch(new RegExp(`^completed: ${partition} ${p.owner} -> ${to}, .*epoch \\d+$`));
    const after = (await cluster.client.partition(partition)).partition;
    expect(after.owner).toBe(to);
    expect(json((await cli('show', partition, '--json')).out)).toMatchObject({ running: false, outcome: { status: 'completed', kind: 'owner-move' } });
  });

  // Last: it crashes a node, which other tests' partitions may live on.
  it('moves --recent says how each move ended: completed, cancelled, aborted with its code', async () => {
    const partition = 'q-107';
    const { to } = await heldMove(partition, 'cli test of an abort');
    await cluster.client.fault({ fault: 'crash-node', node: to });
    await eventually(`${partition} aborted`, async () => ((await cli('show', partition, '--json')).out.includes('"running":false') ? true : undefined));
    await cluster.client.fault({ fault: 'restart-node', node: to });

    type Ended = { partition: string; kind: string; outcome: { status: string; code?: string; reason?: string } | null };
    const ended = await eventually('both ended moves listed', async () => {
      const r = await cli('moves', '--recent', '100', '--json');
      const list = (json(r.out) as { ended: Ended[] }).ended;
      return ['q-100', 'q-106', 'q-107'].every((p) => list.some((m) => m.partition === p)) ? list : undefined;
    });
    const of = (p: string) => ended.find((m) => m.partition === p)!;
    expect(of('q-100')).toMatchObject({ kind: 'follower-move', outcome: { status: 'completed' } });
    expect(of('q-106')).toMatchObject({ kind: 'follower-move', outcome: { status: 'cancelled', reason: 'wrong target' } });
    expect(of('q-107')).toMatchObject({ kind: 'follower-move', outcome: { status: 'aborted', code: 'target_down' } });
    const text = (await cli('moves', '--recent', '100')).out;
    expect(text).toMatch(/q-106 +follower-move .*cancelled: wrong target/);
    expect(text).toMatch(/q-107 +follower-move .*aborted \(target_down\): /);
  });
});
