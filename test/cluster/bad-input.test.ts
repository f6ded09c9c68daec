/**
 * Bad input against every endpoint of the reference cluster (its own process): random JSON, valid bodies
 * with one field broken, malformed JSON text, wrong content types, garbage path parameters and query
 * strings. Nothing may answer 5xx or bring the process down; every 4xx is a BadRequest body that names the
 * broken field; a rejected request changes nothing (the whole topology, every partition record included,
 * stays as it was); and the invariant checker ends with zero breaches. Guarded-write bodies carry the
 * partition's current generation, so a field the validation let through would reach the preconditions and
 * show as an accepted write or a 409 refusal, both failures here.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterClient } from '../../cluster/client';
import { BadRequest, GuardedWrites, WriteRefused, type Topology } from '../../cluster/contract';
import { spawnCluster, type SpawnedCluster } from '../../cluster/spawn';

let cluster: SpawnedCluster;
let client: ClusterClient;
let topo: Topology;
let sent = 0;

beforeAll(async () => {
  cluster = await spawnCluster({ nodes: 5, partitions: 6, streams: 1, seed: 3, clock: 'stepped' });
  client = new ClusterClient(cluster.url);
  topo = await client.topology();
});

afterAll(async () => {
  await cluster?.close();
});

interface Sent {
  method: 'GET' | 'POST' | 'PUT';
  path: string;
  body?: string;
  /** null: no content-type header at all. */
  contentType?: string | null;
  /** A name the 4xx reply must mention (the broken field or query parameter). */
  names?: string;
  /** The only typed refusal (409) this request may get: a well-formed guarded write sent stale on purpose. */
  refusal?: string;
}

/**
 * Send one bad request and check what every bad request must satisfy. No 409 unless the request names its
 * refusal: otherwise a refusal means a broken request passed validation and reached the preconditions.
 */
async function sendBad(req: Sent): Promise<void> {
  sent += 1;
  const headers: Record<string, string> = {};
  if (req.body !== undefined && req.contentType !== null) headers['content-type'] = req.contentType ?? 'application/json';
  const res = await fetch(cluster.url + req.path, {
    method: req.method,
    headers,
    body: req.body === undefined ? undefined : Buffer.from(req.body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  const what = `${req.method} ${req.path.slice(0, 200)} ${req.contentType ?? ''} ${String(req.body).slice(0, 300)} -> ${res.status} ${text.slice(0, 300)}`;
  expect(res.status, what).toBeGreaterThanOrEqual(400);
  expect(res.status, what).toBeLessThan(500);
  if (req.refusal !== undefined) {
    expect(res.status, what).toBe(409);
    expect(WriteRefused.parse(JSON.parse(text)).refusal.code, what).toBe(req.refusal);
  } else {
    expect(res.status, `not a refusal: ${what}`).not.toBe(409);
    const parsed = BadRequest.safeParse(JSON.parse(text));
    expect(parsed.success, `4xx body is {error, message, issues}: ${what}`).toBe(true);
  }
  if (req.names !== undefined) expect(text, `reply names ${req.names}: ${what}`).toContain(req.names);
  expect(await client.topology(), `topology after ${what}`).toEqual(topo);
}

// ---------------------------------------------------------------- the endpoints and their valid bodies

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

interface FieldSpec {
  path: string[];
  kind: 'int' | 'number' | 'string' | 'enum';
  required: boolean;
  /** Largest valid value (numbers) or length (strings); mutations go past it. */
  max: number;
}

interface Endpoint {
  /** POST unless said. */
  method?: 'PUT';
  path: () => string;
  body: () => Record<string, Json>;
  fields: FieldSpec[];
}

const queue = (): Topology['partitions'][number] => topo.partitions.find((p) => p.kind === 'queue')!;
const queueId = (): string => queue().id;
const nodeId = (): string => topo.nodes[0]!.id;
const guardFields: FieldSpec[] = [
  { path: ['expectedGeneration'], kind: 'int', required: true, max: Number.MAX_SAFE_INTEGER },
  { path: ['idempotencyKey'], kind: 'string', required: true, max: 200 },
];
const nodeField = (name: string): FieldSpec => ({ path: [name], kind: 'string', required: true, max: 63 });

function writeEndpoint(write: keyof typeof GuardedWrites): Endpoint {
  const extra: Record<string, FieldSpec[]> = {
    'add-learner': [nodeField('node')],
    'drop-learner': [nodeField('node')],
    swap: [nodeField('learner'), nodeField('leaving')],
    'remove-leaving': [nodeField('node')],
    'promote-learner': [nodeField('node')],
    'close-admission': [],
    'commit-owner': [
      nodeField('newOwner'),
      { path: ['certificate'], kind: 'enum', required: true, max: 0 },
      { path: ['certificate', 'finalBoundary'], kind: 'int', required: true, max: Number.MAX_SAFE_INTEGER },
      { path: ['certificate', 'epoch'], kind: 'int', required: true, max: Number.MAX_SAFE_INTEGER },
    ],
    'reopen-admission': [],
  };
  return {
    path: () => `/v1/partitions/${queueId()}/${write}`,
    body: () => {
      const b: Record<string, Json> = { expectedGeneration: queue().generation, idempotencyKey: 'bad-input' };
      for (const f of extra[write]!) {
        if (f.path.length === 1 && f.kind === 'string') b[f.path[0]!] = nodeId();
      }
      if (write === 'commit-owner') b.certificate = { finalBoundary: 0, epoch: 0 };
      return b;
    },
    fields: [...guardFields, ...extra[write]!],
  };
}

const ENDPOINTS: Record<string, Endpoint> = {
  ...Object.fromEntries(Object.keys(GuardedWrites).map((w) => [w, writeEndpoint(w as keyof typeof GuardedWrites)])),
  advance: {
    path: () => '/v1/clock/advance',
    body: () => ({ ms: 10 }),
    fields: [{ path: ['ms'], kind: 'int', required: true, max: 86_400_000 }],
  },
  publish: {
    path: () => `/v1/partitions/${queueId()}/publish`,
    body: () => ({ count: 1 }),
    fields: [{ path: ['count'], kind: 'int', required: true, max: 1_000_000 }],
  },
  rate: {
    path: () => `/v1/partitions/${queueId()}/rate`,
    body: () => ({ publishRate: 1 }),
    fields: [{ path: ['publishRate'], kind: 'number', required: true, max: 1_000_000 }],
  },
  join: {
    path: () => '/v1/nodes',
    body: () => ({ id: 'bad-input-node', capacity: 1, zone: 'z1' }),
    fields: [
      { path: ['id'], kind: 'string', required: true, max: 63 },
      // Optional with defaults: dropping them would be a valid join, so they are never removed.
      { path: ['capacity'], kind: 'number', required: false, max: 1000 },
      { path: ['zone'], kind: 'string', required: false, max: 64 },
    ],
  },
  draining: {
    method: 'PUT',
    path: () => `/v1/nodes/${nodeId()}/draining`,
    body: () => ({ draining: true, reason: 'bad input' }),
    fields: [
      { path: ['draining'], kind: 'enum', required: true, max: 0 },
      { path: ['reason'], kind: 'string', required: false, max: 200 },
    ],
  },
  'fault:crash-node': {
    path: () => '/v1/faults',
    body: () => ({ fault: 'crash-node', node: nodeId() }),
    fields: [{ path: ['fault'], kind: 'enum', required: true, max: 0 }, nodeField('node')],
  },
  'fault:fail-owner': {
    path: () => '/v1/faults',
    body: () => ({ fault: 'fail-owner', partition: queueId() }),
    fields: [
      { path: ['fault'], kind: 'enum', required: true, max: 0 },
      { path: ['partition'], kind: 'string', required: true, max: 128 },
    ],
  },
  'fault:delay-events': {
    path: () => '/v1/faults',
    body: () => ({ fault: 'delay-events', ms: 0 }),
    fields: [
      { path: ['fault'], kind: 'enum', required: true, max: 0 },
      { path: ['ms'], kind: 'int', required: true, max: 3_600_000 },
    ],
  },
  'fault:set-draining': {
    path: () => '/v1/faults',
    body: () => ({ fault: 'set-draining', node: nodeId(), draining: false }),
    fields: [
      { path: ['fault'], kind: 'enum', required: true, max: 0 },
      nodeField('node'),
      { path: ['draining'], kind: 'enum', required: true, max: 0 },
    ],
  },
  'fault:stall-transfer': {
    path: () => '/v1/faults',
    body: () => ({ fault: 'stall-transfer', partition: queueId(), node: nodeId(), stalled: false }),
    fields: [
      { path: ['fault'], kind: 'enum', required: true, max: 0 },
      { path: ['partition'], kind: 'string', required: true, max: 128 },
      nodeField('node'),
      { path: ['stalled'], kind: 'enum', required: true, max: 0 },
    ],
  },
};

// The valid controls would change state if sent unbroken, so only broken copies of them are ever sent.
const MUTATIONS = ['wrongType', 'negative', 'huge', 'missing', 'extra'] as const;

function wrongTypeFor(kind: FieldSpec['kind']): fc.Arbitrary<Json> {
  const notNumber = fc.oneof(fc.string(), fc.boolean(), fc.constant(null), fc.array(fc.integer(), { maxLength: 3 }), fc.constant({ a: 1 }));
  const notString = fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null), fc.array(fc.string(), { maxLength: 3 }));
  if (kind === 'int' || kind === 'number') return notNumber;
  if (kind === 'string') return notString;
  return fc.oneof(fc.integer(), fc.constant(null), fc.string({ minLength: 1 }).map((s) => `zz-${s}`));
}

/** A value that breaks the field in the chosen way (never a valid one). */
function brokenValue(f: FieldSpec, m: (typeof MUTATIONS)[number]): fc.Arbitrary<Json> {
  switch (m) {
    case 'wrongType':
      return wrongTypeFor(f.kind);
    case 'negative':
      return f.kind === 'int' || f.kind === 'number' ? fc.integer({ min: -1e9, max: -1 }) : wrongTypeFor(f.kind);
    case 'huge':
      if (f.kind === 'int' || f.kind === 'number') return fc.constantFrom(f.max * 2 + 1e6, 1e300, 2 ** 64);
      if (f.kind === 'string') return fc.integer({ min: f.max + 1, max: f.max + 5000 }).map((n) => 'x'.repeat(n));
      return fc.string({ minLength: 300, maxLength: 2000 });
    default:
      return fc.constant(null);
  }
}

function setPath(obj: Record<string, Json>, path: string[], value: Json | undefined): void {
  let at = obj;
  for (const seg of path.slice(0, -1)) {
    const next = at[seg];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) return;
    at = next;
  }
  const last = path.at(-1)!;
  if (value === undefined) delete at[last];
  else at[last] = value;
}

const mutatedRequest: fc.Arbitrary<Sent> = fc
  .constantFrom(...Object.keys(ENDPOINTS))
  .chain((name) => {
    const ep = ENDPOINTS[name]!;
    return fc
      .record({
        field: fc.constantFrom(...ep.fields),
        mutation: fc.constantFrom(...MUTATIONS),
        extraKey: fc.string({ minLength: 1, maxLength: 12 }).map((s) => `extra_${s.replace(/[^a-z0-9]/gi, '')}`),
      })
      .filter(({ field, mutation }) => mutation !== 'missing' || field.required)
      .chain(({ field, mutation, extraKey }) =>
        brokenValue(field, mutation).map((value): Sent => {
          const body = ep.body();
          if (mutation === 'missing') setPath(body, field.path, undefined);
          else if (mutation === 'extra') setPath(body, [...field.path.slice(0, -1), extraKey], 1);
          else setPath(body, field.path, value);
          const names = mutation === 'extra' ? extraKey : field.path.at(-1)!;
          return { method: ep.method ?? 'POST', path: ep.path(), body: JSON.stringify(body), names };
        }),
      );
  });

/** Every endpoint that takes a body, by method and path. */
const targets = (): { method: 'POST' | 'PUT'; path: string }[] => {
  const seen = new Map<string, { method: 'POST' | 'PUT'; path: string }>();
  for (const e of Object.values(ENDPOINTS)) seen.set(`${e.method ?? 'POST'} ${e.path()}`, { method: e.method ?? 'POST', path: e.path() });
  return [...seen.values()];
};

describe('bad input never breaks the reference cluster', { timeout: 120_000 }, () => {
  it('valid bodies with one field broken: 4xx naming the field, nothing changes', async () => {
    await fc.assert(fc.asyncProperty(mutatedRequest, sendBad), { numRuns: 1500 });
  });

  it('random JSON bodies to every endpoint that takes one', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...targets()), fc.json({ maxDepth: 3 }), async (target, body) => {
        await sendBad({ ...target, body });
      }),
      { numRuns: 600 },
    );
  });

  it('malformed JSON text and wrong content types', async () => {
    const malformed = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.constantFrom('', '{', '{"a":', '[1,2', '{"expectedGeneration": 01}', 'nul', '{"a":1}}', '\u0000', '{"node":"x",}'),
      fc.tuple(fc.constantFrom(...Object.values(ENDPOINTS)), fc.nat()).map(([ep, cut]) => {
        const text = JSON.stringify(ep.body());
        return text.slice(0, cut % text.length);
      }),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...targets()), malformed, async (target, body) => {
        // A well-formed body alone is not what this property is about: skip the rare valid one.
        let valid = false;
        try {
          const v: unknown = JSON.parse(body);
          valid = typeof v === 'object' && v !== null && !Array.isArray(v);
        } catch {
          valid = false;
        }
        fc.pre(!valid);
        await sendBad({ ...target, body });
      }),
      { numRuns: 500 },
    );
    const contentTypes = fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', null);
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...Object.values(ENDPOINTS)), contentTypes, async (ep, contentType) => {
        // The cluster reads any content type as JSON (a client that forgets the header gets validation), so
        // each body must be refused on its own: a guarded write as stale, a control for an extra field.
        const body = ep.body();
        const path = ep.path();
        if ('expectedGeneration' in body) {
          // Its own key: a refusal is remembered under its key, and a reused one would be answered 422.
          Object.assign(body, { expectedGeneration: queue().generation + 1, idempotencyKey: `bad-input-${sent}` });
          await sendBad({ method: 'POST', path, body: JSON.stringify(body), contentType, refusal: 'generation_mismatch' });
        } else {
          body.extra_ct = 1;
          await sendBad({ method: ep.method ?? 'POST', path, body: JSON.stringify(body), contentType, names: 'extra_ct' });
        }
      }),
      { numRuns: 200 },
    );
  });

  it('garbage path parameters', async () => {
    const garbageId = fc.oneof(
      fc.string({ minLength: 1, maxLength: 50 }),
      fc.constantFrom('..', '%2e%2e', '%00', '-x', ' ', 'p%2F1', '\u00e9'),
    );
    const writes = [...Object.keys(GuardedWrites), 'publish', 'rate', 'no-such-write', 'progress', ''];
    // Over-long ids and broken percent-encoding are sent separately below (router-level errors).
    await fc.assert(
      fc.asyncProperty(garbageId, fc.constantFrom(...writes), fc.boolean(), async (id, write, encode) => {
        fc.pre(!topo.partitions.some((p) => p.id === id));
        const seg = encode ? encodeURIComponent(id) : id.replace(/[/?#%]/g, '_');
        if (write === '') await sendBad({ method: 'GET', path: `/v1/partitions/${seg}` });
        else if (write === 'progress') await sendBad({ method: 'GET', path: `/v1/partitions/${seg}/progress` });
        else {
          await sendBad({
            method: 'POST',
            path: `/v1/partitions/${seg}/${write}`,
            body: JSON.stringify({ expectedGeneration: 0, idempotencyKey: 'k', node: 'n0', count: 1, publishRate: 1 }),
          });
        }
      }),
      { numRuns: 400 },
    );
    await fc.assert(
      fc.asyncProperty(garbageId, async (id) => {
        await sendBad({ method: 'GET', path: `/v1/partitions/${encodeURIComponent(id)}zz%20/progress` });
      }),
      { numRuns: 100 },
    );

  });

  it('router-level errors (over-long ids, broken percent-encoding) answer a BadRequest body too', async () => {
    // Ids up to 128 characters are valid partition ids, so longer ones must still reach validation or 404.
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 101, max: 5000 }), fc.constantFrom('%', '%zz', '%E0%A4%A', '%%20'), async (n, bad) => {
        const body = JSON.stringify({ expectedGeneration: 0, idempotencyKey: 'k', node: 'n1' });
        await sendBad({ method: 'POST', path: `/v1/partitions/${'a'.repeat(n)}/add-learner`, body });
        await sendBad({ method: 'GET', path: `/v1/partitions/${'a'.repeat(n)}/progress` });
        await sendBad({ method: 'POST', path: `/v1/partitions/q${bad}/add-learner`, body });
        await sendBad({ method: 'GET', path: `/v1/partitions/q${bad}` });
      }),
      { numRuns: 30 },
    );
  });

  it('garbage query strings on the event feed', async () => {
    const badParam = fc.oneof(
      fc.record({ name: fc.constant('after'), value: fc.constantFrom('-1', 'abc', '1.5', '1e400', '9007199254740993') }),
      fc.record({ name: fc.constant('limit'), value: fc.constantFrom('0', '-5', 'x', '100001', '2.5', '') }),
      fc.record({ name: fc.constant('waitMs'), value: fc.constantFrom('-1', '60001', 'soon', '1e9', '0.5') }),
      fc.record({ name: fc.string({ minLength: 1, maxLength: 10 }).map((s) => `q${s.replace(/[^a-z]/gi, '')}`), value: fc.string({ maxLength: 10 }) }),
    );
    await fc.assert(
      fc.asyncProperty(badParam, async ({ name, value }) => {
        const q = new URLSearchParams({ [name]: value });
        await sendBad({ method: 'GET', path: `/v1/events?${q}`, names: name });
      }),
      { numRuns: 300 },
    );
  });

  it('still up, nothing changed and zero breaches after all of it', async () => {
    expect(() => process.kill(cluster.pid, 0)).not.toThrow();
    await client.health();
    expect(await client.topology()).toEqual(topo);
    const report = await client.invariants();
    expect(report.breaches).toEqual([]);
    expect(sent).toBeGreaterThan(2000);
  });
});
