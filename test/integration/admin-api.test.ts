/**
 * The admin API on the real dev server and a reference cluster (partitions q-500..q-519 only): the token rule,
 * cross-site refusals, validated bodies that name the field, unknown names, the audit log across a restart, and an
 * OpenAPI document that lists every route served.
 */
import Ajv2020 from 'ajv/dist/2020';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiPath } from '../../admin/openapi';
import type { MoveInProgress } from '../../operations/moves';
import { reconfigurationWorkflowId, type MoveStatus } from '../../rules/definitions';
import { call, startAdminFixture, TOKEN, type AdminFixture } from './admin-fixture';
import { eventually, temporalEnv, temporalNamespace } from './helpers';

const PARTITIONS = ['q-500', 'q-501', 'q-502'];
let f: AdminFixture;
const base = () => f.admin.url;

beforeAll(async () => {
  // A threshold no node exceeds: the real rebalancer loop proposes nothing, so the moves here are the test's own.
  f = await startAdminFixture({ name: 'admin-api', partitions: PARTITIONS, planner: { threshold: 1e6 } });
});
afterAll(async () => {
  await f?.close();
});

async function auditEntries() {
  return (await call(base(), 'GET', '/api/audit', { token: false })).body.entries as { actor: string; source: string; action: string; target: string | null; reason: string; outcome: string }[];
}

describe('auth', () => {
  it('refuses a mutating call without a token or with a wrong one (401), changing nothing; reads on loopback need none', async () => {
    const before = await auditEntries();
    for (const token of [false, 'wrong-token-wrong-token'] as const) {
      const r = await call(base(), 'POST', '/api/pause', { token, body: { reason: 'maintenance' } });
      expect(r.status).toBe(401);
      expect(r.body.error).toBe('unauthorized');
    }
    expect((await f.deps.rebalancer.status()).state).toBe('running');
    expect(await auditEntries()).toEqual(before);

    const read = await call(base(), 'GET', '/api/status', { token: false });
    expect(read.status).toBe(200);
    expect(read.body.rebalancer).toMatchObject({ state: 'running' });

    const ok = await call(base(), 'POST', '/api/pause', { body: { reason: 'maintenance window' }, headers: { 'x-operator': 'alice' } });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ state: 'paused', pausedBy: 'alice', reason: 'maintenance window' });
    expect((await call(base(), 'POST', '/api/resume', { body: { reason: 'window over' }, headers: { 'x-operator': 'alice' } })).status).toBe(200);
  });

  it('bound to another address, every call needs the token', async () => {
    // 127.0.0.2 is still this machine, but not an address the server treats as loopback-only.
    const other = await f.startAdminOn('127.0.0.2');
    try {
      expect((await call(other.url, 'GET', '/api/status', { token: false })).status).toBe(401);
      expect((await call(other.url, 'GET', '/metrics', { token: false })).status).toBe(401);
      expect((await call(other.url, 'GET', '/api/status', { token: 'wrong-token-wrong-token' })).status).toBe(401);
      expect((await call(other.url, 'GET', '/api/status')).status).toBe(200);
    } finally {
      await other.close();
    }
  });

  it('refuses a cross-site action even with the token, and a body that is not JSON', async () => {
    const forged = await call(base(), 'POST', '/api/pause', { body: { reason: 'forged' }, headers: { origin: 'http://evil.example' } });
    expect(forged.status).toBe(403);
    expect(forged.body.error).toBe('cross_origin');
    const site = await call(base(), 'POST', '/api/pause', { body: { reason: 'forged' }, headers: { 'sec-fetch-site': 'cross-site' } });
    expect(site.status).toBe(403);
    const form = await call(base(), 'POST', '/api/pause', { raw: 'reason=forged', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(form.status).toBe(415);
    expect((await f.deps.rebalancer.status()).state).toBe('running');
    expect((await auditEntries()).some((e) => e.reason === 'forged')).toBe(false);
  });
});

describe('reads', () => {
  it('serves nodes with score vectors, mean and thresholds (paged), the plan, and the status', async () => {
    const nodes = (await call(base(), 'GET', '/api/nodes?limit=2&sort=id', { token: false })).body as { total: number; nodes: { node: string; owned: number; total: number }[]; mean: number; upper: number; lower: number };
    expect(nodes.total).toBe(5);
    expect(nodes.nodes.map((n) => n.node)).toEqual(['n1', 'n2']);
    expect(nodes.upper - nodes.mean).toBe(1e6);
    expect(nodes.mean - nodes.lower).toBe(1e6);
    expect(nodes.nodes[0]!.owned).toBeGreaterThan(0);
    const filtered = (await call(base(), 'GET', '/api/nodes?filter=n5', { token: false })).body as { total: number };
    expect(filtered.total).toBe(1);
    const plan = (await call(base(), 'GET', '/api/plan', { token: false })).body;
    expect(plan).toMatchObject({ steps: [], threshold: 1e6 });
    expect(typeof plan.planningMs).toBe('number');
    const status = (await call(base(), 'GET', '/api/status', { token: false })).body;
    expect(status).toMatchObject({ nodes: { total: 5, live: 5, draining: 0 }, partitions: 3, recoveryPending: [] });
  });
});

describe('moves whose status is late', () => {
  it('shows the last answer of a move that answered an earlier page, with its time, and lists one that never answered as visibility does', async () => {
    const listed: MoveInProgress[] = ['q-500', 'q-501'].map((partition) => ({
      kind: 'follower-move', partition, from: 'n1', to: 'n4', phase: 'validating', workflowId: reconfigurationWorkflowId(partition),
    }));
    const status = (partition: string): MoveStatus => ({
      kind: 'follower-move', partition, from: 'n1', to: 'n4', origin: 'operator', phase: 'catching_up', bytesRemaining: 1_000, boundary: null,
      targetDurable: 10, blockingReason: 'waiting for n4 to catch up', epoch: 1, generation: 2, retries: 0, outcome: null,
    });
    // q-500 answers the first page only; q-501 never answers in time.
    let pages = 0;
    const admin = await f.startAdminWith({
      ...f.deps,
      moves: async () => listed,
      statuses: async (moves, _withinMs, answered) => {
        pages++;
        const first = moves.find((m) => m.partition === 'q-500')!;
        if (pages === 1) answered?.(first, status('q-500'));
        const late = moves.filter((m) => pages > 1 || m.partition !== 'q-500');
        return { answered: pages === 1 ? [status('q-500')] : [], late };
      },
    });
    try {
      const first = (await call(admin.url, 'GET', '/api/moves', { token: false })).body as { running: { partition: string; asOf?: string }[]; late: { partition: string }[] };
      expect(first.running.map((m) => [m.partition, m.asOf])).toEqual([['q-500', undefined]]);
      expect(first.late.map((m) => m.partition)).toEqual(['q-501']);
      const second = (await call(admin.url, 'GET', '/api/moves', { token: false })).body as typeof first & { running: { phase: string; blockingReason: string }[] };
      expect(second.running).toEqual([expect.objectContaining({ partition: 'q-500', phase: 'catching_up', blockingReason: 'waiting for n4 to catch up', asOf: expect.any(String) })]);
      expect(Date.now() - Date.parse(second.running[0]!.asOf!)).toBeLessThan(60_000);
      expect(second.late.map((m) => m.partition)).toEqual(['q-501']);
    } finally {
      await admin.close();
    }
  });
});

describe('bad input', () => {
  it('names the field that is wrong or missing, and changes nothing', async () => {
    const before = await auditEntries();
    const cases: [unknown, RegExp][] = [
      [{ kind: 'follower-move', partition: 'q-500', from: 'n2', reason: 'r' }, /to: /],
      [{ kind: 'teleport', partition: 'q-500', reason: 'r' }, /kind: /],
      [{ kind: 'follower-move', partition: 'q-500', from: 'n2', to: 'n4' }, /reason: /],
      [{ kind: 'follower-move', partition: 'q-500', from: 'n2', to: 'n4', reason: '  ' }, /reason: give a reason/],
      [{ kind: 'follower-move', partition: 'bad id!', from: 'n2', to: 'n4', reason: 'r' }, /partition: /],
      [{ kind: 'grow', partition: 'q-500', to: 'n4', reason: 'r', extra: 1 }, /extra/],
    ];
    for (const [body, message] of cases) {
      const r = await call(base(), 'POST', '/api/moves', { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.message).toMatch(message);
    }
    const malformed = await call(base(), 'POST', '/api/moves', { raw: '{"kind":' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.message).toMatch(/malformed JSON/);
    expect((await call(base(), 'GET', '/api/nodes?limit=0')).body.message).toMatch(/limit: /);
    expect((await call(base(), 'POST', '/api/drain', { body: { reason: 'r' } })).body.message).toMatch(/node: /);
    expect((await call(base(), 'POST', '/api/drain', { body: { node: 'n1', queuesOnly: 'yes', reason: 'r' } })).body.message).toMatch(/queuesOnly: .*boolean/);
    expect(await auditEntries()).toEqual(before);
  });

  it('names an unknown partition or node', async () => {
    const partition = await call(base(), 'POST', '/api/moves', { body: { kind: 'follower-move', partition: 'q-599', from: 'n2', to: 'n4', reason: 'r' } });
    expect(partition.status).toBe(404);
    expect(partition.body.message).toMatch(/unknown partition q-599: the broker has 3 \(q-500, q-501, q-502\)/);
    const node = await call(base(), 'POST', '/api/moves', { body: { kind: 'follower-move', partition: 'q-500', from: 'n2', to: 'n77', reason: 'r' } });
    expect(node.status).toBe(404);
    expect(node.body.message).toMatch(/unknown node n77 \(to\)/);
    const drain = await call(base(), 'POST', '/api/drain', { body: { node: 'n42', reason: 'r' } });
    expect(drain.body.message).toMatch(/unknown node n42 \(node\)/);
    const cancel = await call(base(), 'POST', '/api/moves/q-598/cancel', { body: { reason: 'r' } });
    expect(cancel.body.message).toMatch(/unknown partition q-598/);
    const detail = await call(base(), 'GET', '/api/nodes/n77');
    expect(detail.status).toBe(404);
    expect(detail.body).toMatchObject({ error: 'unknown_node', message: expect.stringMatching(/unknown node n77/) });
  });

  it('refuses a history query it cannot answer (400), naming the parameter', async () => {
    const cases: [string, RegExp][] = [
      ['/api/history?minutes=0', /^invalid query: minutes: /],
      ['/api/history?minutes=61', /^invalid query: minutes: the service keeps 60 minutes of history/],
      ['/api/history?minutes=1.5', /^invalid query: minutes: expected whole minutes/],
      ['/api/history?minutes=soon', /^invalid query: minutes: /],
      ['/api/history?since=0', /^invalid query: .*since/],
      ['/api/nodes/n1?minutes=99', /^invalid query: minutes: /],
      ['/api/nodes/bad%20id!', /^invalid path: node: /],
    ];
    for (const [url, message] of cases) {
      const r = await call(base(), 'GET', url);
      expect(r.status, url).toBe(400);
      expect(r.body.message, url).toMatch(message);
    }
  });
});

describe('drain', () => {
  it('refuses a node holding a stream copy (409), naming the stream and changing nothing', async () => {
    await f.cluster.client.createPartition({ id: 's-500', kind: 'stream', replicas: ['n1', 'n2', 'n3'] });
    try {
      const r = await call(base(), 'POST', '/api/drain', { body: { node: 'n2', reason: 'decommission' } });
      expect(r.status).toBe(409);
      expect(r.body).toMatchObject({ error: 'unmovable_copies', message: expect.stringMatching(/^n2 holds a copy of the stream s-500, which cannot move .*queuesOnly: true/) });
      expect((await f.cluster.client.topology()).nodes.find((n) => n.id === 'n2')!.draining).toBe(false);
    } finally {
      await f.cluster.client.deletePartition('s-500');
    }
  });
});

describe('audit', () => {
  it('records every action with who, when, what, reason and outcome, and keeps it across a restart', async () => {
    const started = Date.now();
    const view = (await call(base(), 'GET', '/api/moves/q-500', { token: false })).status;
    expect(view).toBe(409); // no move yet: refused no_move
    const topology = await f.cluster.client.topology();
    const p = topology.partitions.find((x) => x.id === 'q-501')!;
    const to = topology.nodes.find((n) => ![p.owner, ...p.followers].includes(n.id))!.id;

    const refused = await call(base(), 'POST', '/api/moves', { body: { kind: 'follower-move', partition: 'q-501', from: p.owner, to, reason: 'owner is not a follower' }, headers: { 'x-operator': 'bob' } });
    expect(refused.status).toBe(409);
    const move = await call(base(), 'POST', '/api/moves', { body: { kind: 'follower-move', partition: 'q-501', from: p.followers[0], to, reason: 'spread load' }, headers: { 'x-operator': 'bob' } });
    expect(move.status).toBe(202);
    expect(move.body).toMatchObject({ workflowId: 'reconfigure-q-501', link: `http://127.0.0.1:8233/namespaces/${temporalNamespace()}/workflows/reconfigure-q-501` });
    await eventually('the move to complete', async () => {
      const r = await call(base(), 'GET', '/api/moves/q-501', { token: false });
      return r.body.running === false ? r.body : undefined;
    });
    const pause = await call(base(), 'POST', '/api/pause', { body: { reason: 'audit test' } });
    expect(pause.status).toBe(200);
    await call(base(), 'POST', '/api/resume', { body: { reason: 'audit test over' }, headers: { 'x-operator': 'carol' } });
    // The history has seen the move end; what it sampled before the restart is there after it.
    const before = await eventually('the history to record the move ended', async () => {
      const r = (await call(base(), 'GET', '/api/history')).body as { samples: { at: number }[]; ended: { partition: string; outcome: string }[] };
      return r.ended.some((m) => m.partition === 'q-501' && m.outcome === 'completed') ? r : undefined;
    });

    await f.restartAdmin();
    const after = (await call(base(), 'GET', '/api/history')).body as typeof before & { markers: { action: string; actor: string; reason: string }[] };
    expect(after.samples.slice(0, before.samples.length)).toEqual(before.samples);
    expect(after.ended).toEqual(before.ended);
    expect(after.markers.slice(-2)).toMatchObject([
      { action: 'pause', actor: 'api', reason: 'audit test' },
      { action: 'resume', actor: 'carol', reason: 'audit test over' },
    ]);
    const detail = (await call(base(), 'GET', `/api/nodes/${to}`)).body as { partitions: { partition: string; role: string }[]; ended: { partition: string }[]; points: unknown[] };
    expect(detail.partitions).toContainEqual({ partition: 'q-501', kind: 'queue', role: 'follower' });
    expect(detail.ended.map((m) => m.partition)).toContain('q-501');
    expect(detail.points.length).toBeGreaterThan(0);
    const entries = await auditEntries();
    const mine = entries.filter((e) => e.reason !== 'maintenance window' && e.reason !== 'window over');
    expect(mine.slice(0, 4).map((e) => [e.actor, e.source, e.action, e.target, e.reason, e.outcome.replace(/:.*/, '')])).toEqual([
      ['carol', 'api', 'resume', null, 'audit test over', 'ok'],
      ['api', 'api', 'pause', null, 'audit test', 'ok'],
      ['bob', 'api', 'follower-move', 'q-501', 'spread load', 'ok'],
      ['bob', 'api', 'follower-move', 'q-501', 'owner is not a follower', 'refused (not_a_follower)'],
    ]);
    for (const e of mine.slice(0, 4) as unknown as { at: string }[]) expect(Date.parse(e.at)).toBeGreaterThanOrEqual(started - 1000);
    const paged = (await call(base(), 'GET', `/api/audit?limit=2&before=${(entries[1] as unknown as { id: number }).id}`)).body.entries as unknown[];
    expect(paged).toEqual(entries.slice(2, 4));
  });
});

describe('OpenAPI', () => {
  it('is a valid OpenAPI 3.1 document listing every route served, with schemas that validate bodies', async () => {
    const r = await call(base(), 'GET', '/openapi.json', { token: false });
    expect(r.status).toBe(200);
    const doc = r.body as { openapi: string; paths: Record<string, Record<string, { responses: object; requestBody?: { content: Record<string, { schema: object }> } }>> };
    expect(doc.openapi).toBe('3.1.0');
    expect(f.admin.routes.length).toBeGreaterThan(10);
    for (const route of f.admin.routes) {
      const [method, url] = route.split(' ') as [string, string];
      expect(doc.paths[openApiPath(url)]?.[method.toLowerCase()], route).toBeDefined();
    }
    const served = new Set(f.admin.routes.map((r) => r.split(' ')[1]).map((u) => openApiPath(u!)));
    expect(Object.keys(doc.paths).filter((p) => !served.has(p))).toEqual([]);

    const ajv = new Ajv2020({ strict: false });
    for (const [p, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        expect(Object.keys(op.responses).length, `${method} ${p}`).toBeGreaterThan(0);
        if (op.requestBody) ajv.compile(op.requestBody.content['application/json']!.schema);
      }
    }
    // The history's answers are described as served.
    const answer = (p: string) => ajv.compile((doc.paths[p]!.get as unknown as { responses: { 200: { content: { 'application/json': { schema: object } } } } }).responses[200].content['application/json'].schema);
    for (const [p, url] of [['/api/history', '/api/history'], ['/api/nodes/{node}', '/api/nodes/n1']] as const) {
      const validate = answer(p);
      const served = (await call(base(), 'GET', url)).body;
      expect(validate(served), `${url}: ${JSON.stringify(validate.errors)}`).toBe(true);
      expect(validate({ ...served, samples: [{}], points: [{}] }), url).toBe(false);
    }
    const move = ajv.compile(doc.paths['/api/moves']!.post!.requestBody!.content['application/json']!.schema);
    expect(move({ kind: 'replace', partition: 'q-500', lost: 'n1', with: 'n4', reason: 'lost disk' })).toBe(true);
    expect(move({ kind: 'replace', partition: 'q-500', lost: 'n1', reason: 'lost disk' })).toBe(false);
    expect(TOKEN.length).toBeGreaterThan(16);
  });
});

describe('CLI actions in the audit log', () => {
  it('records a CLI action with its outcome, readable through the API and `rebalancer audit`', async () => {
    const { runCli } = await import('../../client/cli');
    Object.assign(process.env, { DATA_DIR: f.dataDir, ...temporalEnv(), CLUSTER_URL: f.cluster.url });
    let out = '';
    const io = { out: (t: string) => void (out += t), err: () => undefined };
    expect(await runCli(['cancel', 'q-502', '--reason', 'cli audit test'], io)).toBe(1);
    const [entry] = await auditEntries();
    expect(entry).toMatchObject({ source: 'cli', action: 'cancel', target: 'q-502', reason: 'cli audit test' });
    expect(entry!.outcome).toMatch(/^refused \(no_move\)/);
    out = '';
    expect(await runCli(['audit', '--json', '--limit', '1'], io)).toBe(0);
    expect((JSON.parse(out) as { entries: unknown[] }).entries).toEqual([entry]);
  });
});
