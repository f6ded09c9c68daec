/**
 * The HTTP server in process (startCluster): auth, clocks, the event feed's long-poll, delayed and dropped
 * events, and that bad input changes nothing. Refusal-by-refusal behaviour is the conformance suite's job.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { ClusterClient } from '../../cluster/client';
import { startCluster, type RunningCluster } from '../../cluster/server';
import { fastConfig } from './helpers';

const running: RunningCluster[] = [];
afterEach(async () => {
  for (const c of running.splice(0)) await c.close();
});

async function stepped(): Promise<{ cluster: RunningCluster; client: ClusterClient }> {
  const cluster = await startCluster({ clock: 'stepped', partitions: 3, config: fastConfig });
  running.push(cluster);
  return { cluster, client: new ClusterClient(cluster.url) };
}

describe('the cluster server', () => {
  it('needs a token off loopback and checks it on every request', async () => {
    await expect(startCluster({ host: '0.0.0.0' })).rejects.toThrow(/token/);
    const cluster = await startCluster({ host: '0.0.0.0', token: 's3cret', clock: 'stepped' });
    running.push(cluster);
    const url = cluster.url.replace('0.0.0.0', '127.0.0.1');
    expect((await fetch(`${url}/v1/topology`)).status).toBe(401);
    expect((await new ClusterClient(url, { token: 's3cret' }).topology()).nodes).toHaveLength(5);
  });

  it('marks a node draining through the contract: bearer token, unknown node named, one event per change', async () => {
    const cluster = await startCluster({ host: '127.0.0.1', token: 's3cret', clock: 'stepped', partitions: 3, config: fastConfig });
    running.push(cluster);
    const client = new ClusterClient(cluster.url, { token: 's3cret' });
    const put = (id: string, body: unknown, headers: Record<string, string> = client.authHeaders()) =>
      fetch(`${cluster.url}/v1/nodes/${id}/draining`, { method: 'PUT', headers, body: JSON.stringify(body) });
    const { cursor } = await client.events(0);

    expect((await put('n4', { draining: true }, {})).status).toBe(401);
    const unknown = await put('n77', { draining: true });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { message: string }).message).toMatch(/n77/);
    const bad = await put('n4', { draining: 'yes', extra: 1 });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { issues: { path: string }[] }).issues.map((i) => i.path).sort()).toEqual(['body', 'draining']);
    expect((await client.nodes()).nodes.find((n) => n.id === 'n4')!.draining).toBe(false);
    expect((await client.events(cursor)).events).toEqual([]);

    expect(await client.setDraining('n4', true, 'decommission rack 2')).toMatchObject({ id: 'n4', draining: true });
    expect(await client.setDraining('n4', true)).toMatchObject({ id: 'n4', draining: true });
    const refused = await client.write('q-0', 'add-learner', { expectedGeneration: 1, idempotencyKey: 'dr', node: 'n4' });
    expect(refused.ok === false && refused.refusal.code).toBe('node_draining');
    await client.fault({ fault: 'set-draining', node: 'n4', draining: false });
    expect((await client.nodes()).nodes.find((n) => n.id === 'n4')!.draining).toBe(false);
    const { events } = await client.events(cursor);
    expect(events.map(({ seq: _s, at: _a, ...e }) => e)).toEqual([
      { type: 'node_draining', node: 'n4', draining: true, reason: 'decommission rack 2' },
      { type: 'node_draining', node: 'n4', draining: false, reason: null },
    ]);
  });

  it('runs the wall clock on its own and refuses to step it', async () => {
    const cluster = await startCluster({ clock: 'wall', config: { tickMs: 20 } });
    running.push(cluster);
    const client = new ClusterClient(cluster.url);
    const res = await fetch(`${cluster.url}/v1/clock/advance`, { method: 'POST', body: JSON.stringify({ ms: 10 }) });
    expect(res.status).toBe(409);
    await new Promise((r) => setTimeout(r, 150));
    expect((await client.clock()).now).toBeGreaterThan(50);
  });

  it('long-polls the event feed until an event arrives', async () => {
    const { client } = await stepped();
    const { cursor } = await client.events(0);
    const started = Date.now();
    const page = client.events(cursor, { waitMs: 10_000 });
    setTimeout(() => void client.write('q-0', 'add-learner', { expectedGeneration: 1, idempotencyKey: 'lp', node: 'n4' }), 100);
    const { events } = await page;
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(events[0]).toMatchObject({ type: 'assignment_changed', partition: 'q-0', write: 'add-learner', generation: 2 });
  });

  it('delays and drops events on request, keeping sequence numbers', async () => {
    const { client } = await stepped();
    await client.fault({ fault: 'delay-events', ms: 1_000 });
    await client.joinNode('n9');
    expect((await client.events(0)).events).toEqual([]);
    await client.advance(1_000);
    const delayed = await client.events(0);
    expect(delayed.events).toEqual([expect.objectContaining({ seq: 1, type: 'node_joined', node: 'n9' })]);
    await client.fault({ fault: 'drop-events', count: 1 });
    await client.joinNode('n10');
    await client.joinNode('n11');
    const after = await client.events(delayed.cursor);
    expect(after.events).toEqual([expect.objectContaining({ seq: 3, type: 'node_joined', node: 'n11' })]);
  });

  it('answers bad input with 400 or 404 and changes nothing', async () => {
    const { cluster, client } = await stepped();
    const before = await client.partition('q-0');
    const bad = await fetch(`${cluster.url}/v1/partitions/q-0/add-learner`, {
      method: 'POST',
      body: JSON.stringify({ expectedGeneration: 1, idempotencyKey: 'x', node: 'N 4', extra: true }),
    });
    expect(bad.status).toBe(400);
    const body = (await bad.json()) as { error: string; issues: { path: string }[] };
    expect(body.error).toBe('bad_request');
    expect(body.issues.map((i) => i.path)).toContain('node');
    expect((await fetch(`${cluster.url}/v1/partitions/nope/add-learner`, { method: 'POST', body: '{}' })).status).toBe(400);
    const missing = await fetch(`${cluster.url}/v1/partitions/nope/add-learner`, {
      method: 'POST',
      body: JSON.stringify({ expectedGeneration: 1, idempotencyKey: 'y', node: 'n4' }),
    });
    expect(missing.status).toBe(404);
    expect((await fetch(`${cluster.url}/v1/faults`, { method: 'POST', body: '{"fault":"crash-node","node":"n77"}' })).status).toBe(404);
    expect((await fetch(`${cluster.url}/v1/events?after=-1`)).status).toBe(400);
    expect(await client.partition('q-0')).toEqual(before);
  });

  it('serves an OpenAPI 3.1 document with every route and contract schema', async () => {
    const { cluster } = await stepped();
    const doc = (await (await fetch(`${cluster.url}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, unknown>;
      components: { schemas: Record<string, unknown> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/v1/topology', '/v1/partitions/{id}/swap', '/v1/events', '/v1/nodes/{id}/draining']),
    );
    expect(doc.components.schemas).toHaveProperty('WriteRefused');
  });

  it('publishes, sets rates and joins nodes', async () => {
    const { client } = await stepped();
    const before = await client.progress('q-1');
    const pub = await client.publish('q-1', 25);
    expect(pub).toEqual({ firstOffset: before.tail, nextOffset: before.tail + 25 });
    const view = await client.setRate('q-1', 0);
    await client.advance(1_000);
    expect((await client.progress('q-1')).tail).toBe(view.progress.tail);
    expect((await client.joinNode('n6')).live).toBe(true);
    const dup = await fetch(`${running[0]!.url}/v1/nodes`, { method: 'POST', body: '{"id":"n6"}' });
    expect(dup.status).toBe(409);
  });

  it('drops a test-only switch an older version stored in the data directory, on load and in what it writes back', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cluster-old-data-'));
    try {
      await (await startCluster({ clock: 'stepped', partitions: 3, data: dir })).close();
      const db = new Database(path.join(dir, 'cluster.db'));
      const row = db.prepare<[], { v: string }>("SELECT v FROM meta WHERE k = 'sim'").get()!;
      const meta = JSON.parse(row.v) as { config: Record<string, unknown> };
      meta.config.unsafeSkipBoundaryCheck = true;
      db.prepare("UPDATE meta SET v = ? WHERE k = 'sim'").run(JSON.stringify(meta));
      db.close();

      const cluster = await startCluster({ clock: 'stepped', data: dir });
      expect(cluster.resumed).toBe(true);
      expect(Object.keys(cluster.sim.config)).not.toContain('unsafeSkipBoundaryCheck');
      await new ClusterClient(cluster.url).advance(100);
      await cluster.close();
      const after = new Database(path.join(dir, 'cluster.db'), { readonly: true });
      expect(after.prepare<[], { v: string }>("SELECT v FROM meta WHERE k = 'sim'").get()!.v).not.toContain('unsafe');
      after.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
