/**
 * The snapshot check's path without zod (conformingTopology) beside the schema: whatever a snapshot holds,
 * checkSnapshot answers as zod alone did, the same topology or the same problem with its path.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NodesView, Topology } from '../../cluster/contract';
import { checkSnapshot, topologyProblem } from '../../planner';
import { conformingNodes, conformingTopology } from '../../cluster/conforming';
import { node, partition, topology } from './planner-topology';

/** checkSnapshot as it was, zod alone: the reference. */
function zodCheck(text: string): ReturnType<typeof checkSnapshot> {
  const parsed = Topology.safeParse(JSON.parse(text));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const path = issue.path.length > 0 ? issue.path.join('.') : 'the document';
    return { ok: false, problem: `${path}: ${issue.message} (expected the body of GET /v1/topology)` };
  }
  const problem = topologyProblem(parsed.data);
  return problem === null ? { ok: true, topology: parsed.data } : { ok: false, problem };
}

/** Every kind of record and optional field the schema has, consistent, so checkSnapshot accepts it. */
function fixture(): Record<string, unknown> {
  const { downSince: _, ...old } = node('n3');
  return topology(
    [node('n0'), node('n1'), node('n2', { live: false, downSince: 5, capacity: 2.5, zone: 'z2', publishRate: 1.5 }), old as never],
    [
      partition('q-0', 'n0', ['n1', 'n2']),
      partition('q.1_x', 'n1', ['n2'], {
        learners: ['n3'],
        boundary: { offset: 5, joined: 'n2', leaving: 'n0', epoch: 1, swappedBack: true },
        durability: { mode: 'replica_accepted', n: 2 },
      }),
      partition('Q-2', 'n2', [], {
        kind: 'stream',
        leaving: 'n0',
        admission: 'closed',
        boundary: { offset: 0, joined: 'n1', leaving: 'n0', epoch: 2 },
        pendingRecovery: { epoch: 3, openedAt: 4, reason: 'owner lost', failedOwner: 'n1' },
        retainedCopies: [{ node: 'n3', durableOffset: 1, removedAt: 2, retainedUntil: 3, bytesToCatchUp: 4 }],
        durability: { mode: 'local_durable' },
        replicationFactor: 16,
      }),
    ],
  ) as unknown as Record<string, unknown>;
}

/** Every path to a value in `v`: object keys and array indexes. */
function paths(v: unknown, at: (string | number)[] = []): (string | number)[][] {
  if (typeof v !== 'object' || v === null) return [];
  const entries: [string | number, unknown][] = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
  return entries.flatMap(([k, x]) => [[...at, k], ...paths(x, [...at, k])]);
}

/** A copy of `doc` with the value at `path` replaced (deleted when `value` is undefined). */
function mutated(doc: unknown, path: (string | number)[], value: unknown): unknown {
  const copy = structuredClone(doc) as Record<string | number, unknown>;
  let o = copy;
  for (const k of path.slice(0, -1)) o = o[k] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (value === undefined && !Array.isArray(o)) delete o[last];
  else o[last] = value;
  return copy;
}

// Near misses of every field's type and range, and values some other field takes.
const VALUES: unknown[] = [
  undefined, null, true, false, 0, -0, -1, 1, 1.5, 16, 17, 1000, 1000.5, 1001, 2 ** 53, 1e308,
  '', 'x', 'n9', 'N1', '-n', 'Bad Id', 'q-9', 'queue', 'stream', 'closed', 'open', '1',
  'majority_durable', 'replica_durable', 'local_durable', [], ['n1'], ['Bad Id'], [{}], {},
  { mode: 'majority_durable' }, { mode: 'replica_durable', n: 2 }, { mode: 'replica_durable' }, { mode: 'majority_durable', n: 2 },
  { offset: 1, joined: 'n1', leaving: 'n0', epoch: 1 },
];

/** `doc` with each field set to each of VALUES or deleted, and each object with a key beside those the schema strips. */
function nearMisses(doc: unknown): unknown[] {
  const out: unknown[] = [];
  for (const path of [[], ...paths(doc)]) {
    const target = path.reduce<unknown>((o, k) => (o as Record<string | number, unknown>)[k], doc);
    if (typeof target === 'object' && target !== null && !Array.isArray(target)) out.push(mutated(doc, [...path, 'extra'], 1));
    if (path.length > 0) for (const value of VALUES) out.push(mutated(doc, path, value));
  }
  return out;
}

function sameAsZod(doc: unknown): void {
  const text = JSON.stringify(doc);
  expect(checkSnapshot(text)).toEqual(zodCheck(text));
  const fast = conformingTopology(JSON.parse(text));
  // A yes without zod is zod's yes, to the same records.
  if (fast !== null) expect(Topology.safeParse(JSON.parse(text))).toEqual({ success: true, data: fast });
}

describe('checkSnapshot without zod on the common case', () => {
  it('takes the fixture without zod, as zod returns it (downSince filled in with null)', () => {
    const doc = fixture();
    const fast = conformingTopology(structuredClone(doc));
    expect(fast).not.toBeNull();
    expect(fast).toEqual(Topology.parse(doc));
    expect(checkSnapshot(JSON.stringify(doc))).toEqual({ ok: true, topology: fast });
  });

  it('answers as zod alone for every field set to every near miss, deleted, or beside a key the schema strips', () => {
    let refused = 0;
    for (const m of nearMisses(fixture())) {
      sameAsZod(m);
      if (conformingTopology(m) === null) refused += 1;
    }
    // Most near misses are refused: the comparison above ran zod's wording of them.
    expect(refused).toBeGreaterThan(1000);
  });

  it.each([
    ['a node id out of the pattern', ['nodes', 0, 'id'], 'N0', 'nodes.0.id: a node id: 1-63 of a-z, 0-9, "-", "_", starting with a letter or digit'],
    ['a capacity over the bound', ['nodes', 1, 'capacity'], 1001, 'nodes.1.capacity: Too big: expected number to be <=1000'],
    ['a history entry without its node', ['partitions', 0, 'history', 1, 'node'], undefined, 'partitions.0.history.1.node: Invalid input: expected string, received undefined'],
    ['an unknown durability mode', ['partitions', 1, 'durability', 'mode'], 'none', "partitions.1.durability.mode: Invalid discriminator value. Expected 'majority_durable' | 'replica_durable' | 'replica_accepted' | 'local_durable'"],
    ['a fractional offset', ['partitions', 2, 'retainedCopies', 0, 'durableOffset'], 1.5, 'partitions.2.retainedCopies.0.durableOffset: Invalid input: expected int, received number'],
  ])('refuses %s with the path and what was expected', (_what, path, value, problem) => {
    const text = JSON.stringify(mutated(fixture(), path, value));
    expect(checkSnapshot(text)).toEqual({ ok: false, problem: `${problem} (expected the body of GET /v1/topology)` });
  });

  it('answers as zod alone for any JSON value anywhere', () => {
    const doc = fixture();
    const all = paths(doc);
    fc.assert(
      fc.property(fc.constantFrom(...all), fc.jsonValue({ maxDepth: 2 }), (path, value) => sameAsZod(mutated(doc, path, value))),
      { numRuns: 500, seed: 7 },
    );
  });
});

describe('the nodes read without zod (conformingNodes)', () => {
  const view = (): Record<string, unknown> => {
    const { generation, now, nodes } = fixture();
    return { generation, now, nodes };
  };
  /** A yes without zod is zod's yes, to the same nodes; a no leaves the words to zod. */
  const sameAsZod = (doc: unknown): boolean => {
    const fast = conformingNodes(structuredClone(doc));
    if (fast !== null) expect(NodesView.safeParse(doc)).toEqual({ success: true, data: fast });
    return fast !== null;
  };

  it('takes every node a move reads as zod returns it (downSince filled in with null)', () => {
    expect(conformingNodes(view())).toEqual(NodesView.parse(view()));
    expect(conformingNodes(view())).not.toBeNull();
  });

  it('answers as zod for every field set to every near miss, deleted, or beside a key the schema strips', () => {
    const refused = nearMisses(view()).filter((m) => !sameAsZod(m)).length;
    expect(refused).toBeGreaterThan(300);
  });
});
