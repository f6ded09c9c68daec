/**
 * The CLI as a new user meets it, run in-process against the real dev server and a reference cluster: exit
 * codes, --json for refusals, unreachable servers, `show` without a move, moves refused up front, --wait's
 * lines, ended moves in `moves`, --version.
 */
import net from 'node:net';
import fs from 'node:fs';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../client/cli';
import { connectClient, pickMove, startTestCluster, startWorker, temporalAddress } from './helpers';

type TestCluster = Awaited<ReturnType<typeof startTestCluster>>;

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
  Object.assign(process.env, { TEMPORAL_ADDRESS: temporalAddress(), CLUSTER_URL: cluster.url, TEMPORAL_TASK_QUEUE: taskQueue });
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

/** stdout of a --json run must be exactly one JSON object. */
function json(out: string): Record<string, unknown> {
  expect(out.trim().split('\n')).toHaveLength(1);
  return JSON.parse(out) as Record<string, unknown>;
}

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

async function withEnv<T>(vars: Record<string, string>, run: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try {
    return await run();
  } finally {
    Object.assign(process.env, saved);
  }
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
    for (const phase of ['adding_learner', 'catching_up', 'swapping', 'covering_boundary', 'removing']) expect(phases).toContain(phase);
    expect(lines.filter((l) => l.startsWith('completed'))).toEqual([lines.at(-1)]);
    expect(lines.at(-1)).toMatch(new RegExp(`^completed: q-100 ${from} -> ${to}, boundary B \\d+, epoch \\d+$`));

    const listed = await cli('moves', '--json');
    expect(listed.code).toBe(0);
    const { ended } = json(listed.out) as { ended: { partition: string; from: string; to: string; outcome: { status: string } }[] };
    expect(ended).toContainEqual(expect.objectContaining({ partition: 'q-100', from, to, outcome: expect.objectContaining({ status: 'completed' }) }));
    expect((await cli('moves')).out).toMatch(/recently ended:[\s\S]*q-100 .*completed: q-100/);
  });
});
