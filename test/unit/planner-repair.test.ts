/**
 * Self-healing in the planner: which copies are lost for good, repairs before balance and the fewest live copies
 * first, and, over random clusters (fast-check), that no plan takes a partition further below its replication
 * factor than the loss did. Each rule's test was also run with the rule taken out and failed there (the property's
 * mutant runs here; the ordering mutants by hand, see the report of the change).
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Node, Partition, Topology } from '../../cluster/contract';
import { DEFAULT_PLANNER_CONFIG, planNow, planToConvergence, underReplicated, type PlannerConfig, type Proposal } from '../../planner';
import { TickPlanner } from '../../planner/tick';
import type { NodeState } from '../../planner/state';
import { afterSteps, input, node, partition, ring, topology } from './planner-topology';

const config: PlannerConfig = { ...DEFAULT_PLANNER_CONFIG };
const NOW = 10_000_000;

/** `id` down since `since` (broker clock), its disk lost when `diskLost`. */
function down(t: Topology, id: string, since: number, diskLost = false): void {
  const n = t.nodes.find((x) => x.id === id)!;
  n.live = false;
  n.downSince = since;
  if (diskLost) n.storageInstance = `${id}-s2`;
}

function at(t: Topology, now = NOW): Topology {
  t.now = now;
  return t;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('planner: which copies are lost for good', () => {
  it('a node down with its disk lost is replaced at once; a node down without is replaced only after REBALANCER_REPLACE_AFTER_MS', () => {
    const t = at(ring(4, 2, 3));
    down(t, 'n1', NOW - 1000, true);
    const lost = planNow(input(t), { ...config, maxTransfersPerCluster: 100, maxTransfersPerNode: 100 });
    const followed = t.partitions.filter((p) => p.followers.includes('n1')).map((p) => p.id);
    expect(lost.steps.filter((s) => s.op === 'follower_replace').map((s) => s.partition).sort()).toEqual(followed.sort());
    for (const s of lost.steps.filter((x) => x.op === 'follower_replace')) {
      expect(s.from).toBe('n1');
      expect(s.reason).toMatch(/^repair: n1 is down with its disk lost; q-\d+ has 2 of 3 copies live/);
    }

    const t2 = at(ring(4, 2, 3));
    down(t2, 'n1', NOW - config.replaceAfterMs + 1);
    expect(planNow(input(t2), config).steps.some((s) => s.op === 'follower_replace')).toBe(false);
    down(t2, 'n1', NOW - config.replaceAfterMs);
    const late = planNow(input(t2), config).steps.filter((s) => s.op === 'follower_replace');
    expect(late.length).toBeGreaterThan(0);
    expect(late[0]!.reason).toMatch(/n1 has been down 600 s, longer than 600 s/);
  });

  it('replaces nothing with repair off (0), nothing on a live node with a lost disk (it rejoins), never an owner (recovery moves it)', () => {
    const t = at(ring(4, 2, 3));
    down(t, 'n1', 0, true);
    expect(planNow(input(t), { ...config, replaceAfterMs: 0 }).steps.some((s) => s.op === 'follower_replace')).toBe(false);

    const live = at(ring(4, 2, 3));
    live.nodes[1]!.storageInstance = 'n1-s2';
    expect(planNow(input(live), config).steps.some((s) => s.op === 'follower_replace')).toBe(false);

    const owner = at(topology([node('n1'), node('n2'), node('n3'), node('n4')], [partition('q-a', 'n1', ['n2', 'n3'])]));
    down(owner, 'n1', 0, true);
    expect(planNow(input(owner), config).steps).toEqual([]);
  });

  it("leaves a partition an operator pinned, and a lost copy on a node an operator excluded, alone, and says so", () => {
    const t = at(topology([node('n1'), node('n2'), node('n3'), node('n4')], [partition('q-a', 'n1', ['n2', 'n3'])]));
    down(t, 'n3', 0, true);
    const hold = { by: 'alice', reason: 'audit' };
    const pinned = planNow(input(t, { pinned: { 'q-a': hold } }), config);
    expect(pinned.steps).toEqual([]);
    expect(pinned.idleReason).toMatch(/^repair of q-a \(n3 is down with its disk lost\) waits: pinned by alice/);
    const excluded = planNow(input(t, { excluded: { n3: hold } }), config);
    expect(excluded.steps).toEqual([]);
    expect(excluded.idleReason).toMatch(/^repair of q-a \(n3 is down with its disk lost\) waits: n3 is excluded by alice/);
  });

  it('lists under-replicated partitions, the fewest live copies first, with the copies lost for good and why', () => {
    const t = at(topology([node('n1'), node('n2'), node('n3'), node('n4'), node('n5')], [partition('q-a', 'n1', ['n2', 'n3']), partition('q-b', 'n1', ['n4', 'n5'])]));
    down(t, 'n4', NOW - 5, true);
    down(t, 'n5', NOW - 5);
    down(t, 'n3', NOW - 5);
    expect(underReplicated(t, config.replaceAfterMs, [{ partition: 'q-b', from: 'n4', to: 'n2' }])).toEqual([
      { partition: 'q-b', replicationFactor: 3, liveCopies: 1, lost: [{ node: 'n4', reason: 'n4 is down with its disk lost' }], repair: { lost: 'n4', to: 'n2' } },
      { partition: 'q-a', replicationFactor: 3, liveCopies: 2, lost: [], repair: null },
    ]);
  });
});

describe('planner: repair before balance', () => {
  it('repairs first: with one transfer slot the lost copy is replaced before an empty node is filled', () => {
    const t = at(ring(4, 2, 5));
    down(t, 'n3', 0, true);
    const plan = planNow(input(t), { ...config, maxTransfersPerCluster: 1 });
    expect(plan.steps).toHaveLength(1);
    expect(plan.steps[0]).toMatchObject({ op: 'follower_replace', from: 'n3' });
  });

  it('repairs the partitions with the fewest live copies first', () => {
    const nodes = ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'].map((id) => node(id));
    // q-a loses one copy of three, q-b two: q-b comes first though it is listed second.
    const t = at(topology(nodes, [partition('q-a', 'n1', ['n2', 'n4']), partition('q-b', 'n1', ['n3', 'n4'])]));
    down(t, 'n4', 0, true);
    down(t, 'n3', 0, true);
    const one = planNow(input(t), { ...config, maxTransfersPerCluster: 1 });
    expect(one.steps).toMatchObject([{ op: 'follower_replace', partition: 'q-b' }]);
    expect(one.steps[0]!.reason).toMatch(/q-b has 1 of 3 copies live/);
  });

  it('a lost copy no longer keeps its partition out of plans: a drain of another node hands it off and moves it', () => {
    // n2 lost for good: its copies are suspended (disk lost), which used to mark every partition with one busy.
    const t = at(ring(5, 1, 4));
    down(t, 'n2', 0, true);
    for (const p of t.partitions) for (const h of p.history) if (h.node === 'n2') h.suspended = true;
    const drain = planToConvergence(input(t, { draining: ['n1'], repair: false }), config);
    const held = t.partitions.filter((p) => p.owner === 'n1' || p.followers.includes('n1'));
    expect(held.some((p) => p.followers.includes('n2'))).toBe(true);
    const off = new Set(drain.steps.filter((s) => s.from === 'n1').map((s) => s.partition));
    expect(off).toEqual(new Set(held.map((p) => p.id)));
    expect(drain.steps.some((s) => s.op === 'follower_replace')).toBe(false);
  });

  it("replaces a copy whose zone has no node left in the emptiest zone that has one, instead of leaving it a copy short", () => {
    // n3 was z3's only node and is lost with its disk: every partition keeps one copy in z1 and one in z2.
    const nodes = [node('n1', { zone: 'z1' }), node('n2', { zone: 'z2' }), node('n3', { zone: 'z3' }), node('n4', { zone: 'z1' }), node('n5', { zone: 'z2' })];
    const t = at(topology(nodes, Array.from({ length: 6 }, (_, i) => partition(`q-${i}`, i % 2 ? 'n1' : 'n2', [i % 2 ? 'n5' : 'n4', 'n3']))));
    down(t, 'n3', 0, true);
    const repairs = planToConvergence(input(t, { now: NOW }), config).steps.filter((s) => s.op === 'follower_replace');
    expect(repairs.map((s) => s.partition).sort()).toEqual(t.partitions.map((p) => p.id).sort());
    // Each went where the partition had the fewest copies: z1 and z2 hold one each, so either, never a third.
    for (const s of repairs) expect(['n1', 'n2', 'n4', 'n5']).toContain(s.to);
    // While z3 has a node that may take it, the copy goes there.
    const t3 = at(topology([...nodes, node('n6', { zone: 'z3' })], t.partitions));
    down(t3, 'n3', 0, true);
    for (const s of planToConvergence(input(t3, { now: NOW }), config).steps.filter((x) => x.op === 'follower_replace')) expect(s.to).toBe('n6');
  });

  it("counts lost copies in the mean: the plan's spread after its repairs is the spread of the topology they leave", () => {
    const t = at(ring(4, 1, 6));
    down(t, 'n1', 0, true);
    // Recovery moved what n1 owned to a follower: n1 holds follower copies only, each lost with its disk.
    for (const p of t.partitions.filter((x) => x.owner === 'n1')) Object.assign(p, { owner: p.followers[0]!, followers: [...p.followers.slice(1), 'n1'] });
    const plan = planToConvergence(input(t), config);
    expect(plan.steps.some((s) => s.op === 'follower_replace')).toBe(true);
    const left = afterSteps(t, plan.steps);
    // The node lost for good holds nothing now: the next plan reads the cluster as the repairs left it.
    left.partitions = left.partitions.map((p) => ({ ...p, followers: p.followers.filter((f) => f !== 'n1') }));
    expect(plan.spreadAfter).toBeCloseTo(planNow(input(left), config).spreadBefore, 9);
    expect(plan.spreadAfter).toBeLessThanOrEqual(config.threshold);
  });

  it('a suspended copy on a live node (rejoining) still holds its partition, and says so', () => {
    const t = at(topology([node('n1'), node('n2'), node('n3'), node('n4')], [partition('q-a', 'n1', ['n2', 'n3'])]));
    t.partitions[0]!.history.find((h) => h.node === 'n2')!.suspended = true;
    const plan = planNow(input(t, { draining: ['n1'] }), config);
    expect(plan.steps).toEqual([]);
    expect(plan.idleReason).toBe('drain of n1: q-a waits (n2 rejoining (suspended))');
  });
});

// ---------------------------------------------------------------- property: never further below the replication factor

interface Case {
  topology: Topology;
  config: PlannerConfig;
}

/** Random clusters with nodes down: some with the disk lost, some past the timeout, some not yet. */
const lossy: fc.Arbitrary<Case> = fc
  .record({
    n: fc.integer({ min: 4, max: 9 }),
    zones: fc.integer({ min: 1, max: 3 }),
    parts: fc.array(fc.record({ seeds: fc.array(fc.nat(), { minLength: 3, maxLength: 3 }), rf: fc.integer({ min: 1, max: 3 }), bytes: fc.integer({ min: 1000, max: 1e8 }) }), {
      minLength: 4,
      maxLength: 40,
    }),
    lost: fc.array(fc.tuple(fc.nat(), fc.constantFrom('disk', 'timeout', 'recent')), { minLength: 1, maxLength: 3 }),
    perNode: fc.integer({ min: 1, max: 3 }),
    cluster: fc.integer({ min: 1, max: 12 }),
  })
  .map((r) => {
    const nodes: Node[] = Array.from({ length: r.n }, (_, i) => node(`n${i}`, { zone: `z${i % r.zones}` }));
    const parts: Partition[] = r.parts.map((q, i) => {
      const picked: string[] = [];
      for (let k = 0; picked.length < q.rf && k < 3 * r.n; k++) {
        const id = `n${(q.seeds[k % 3]! + k) % r.n}`;
        if (!picked.includes(id)) picked.push(id);
      }
      return partition(`q-${i}`, picked[0]!, picked.slice(1), { historyBytes: q.bytes });
    });
    const t = at(topology(nodes, parts));
    for (const [i, kind] of r.lost) {
      const id = `n${i % r.n}`;
      if (kind === 'disk') down(t, id, NOW - 1000, true);
      else down(t, id, kind === 'timeout' ? NOW - DEFAULT_PLANNER_CONFIG.replaceAfterMs : NOW - 1000);
    }
    return { topology: t, config: { ...DEFAULT_PLANNER_CONFIG, maxTransfersPerNode: r.perNode, maxTransfersPerCluster: r.cluster } };
  });

/**
 * The first step that takes a partition further below its replication factor, in words, or null: each step
 * applied in order, a partition's counted live copies (owner and followers on live nodes) never drop, and a repair
 * raises them by one (it adds a live copy in place of one already lost).
 */
function belowViolation(t: Topology, steps: Proposal[]): string | null {
  const live = new Map(t.nodes.map((n) => [n.id, n.live]));
  const copies = new Map(t.partitions.map((p) => [p.id, [p.owner, ...p.followers]]));
  const count = (id: string) => copies.get(id)!.filter((n) => live.get(n)).length;
  for (const s of steps) {
    const before = count(s.partition);
    const c = copies.get(s.partition)!;
    if (s.op !== 'owner_handoff') c[c.indexOf(s.from)] = s.to;
    const after = count(s.partition);
    if (after < before) return `${s.op} ${s.partition} ${s.from} -> ${s.to} leaves ${after} live copies of ${before}`;
    if (s.op === 'follower_replace' && after !== before + 1) return `repair ${s.partition} ${s.from} -> ${s.to} leaves ${after} live copies, not ${before + 1}`;
  }
  return null;
}

const keepsCopies = (c: Case): boolean => belowViolation(c.topology, planToConvergence(input(c.topology), c.config).steps) === null;

describe('planner properties: a repair never takes a partition further below its replication factor', () => {
  it('every step keeps the live copies, every repair adds one, and repairs happen', () => {
    let repairs = 0;
    fc.assert(
      fc.property(lossy, (c) => {
        const steps = planToConvergence(input(c.topology), c.config).steps;
        repairs += steps.filter((s) => s.op === 'follower_replace').length;
        const v = belowViolation(c.topology, steps);
        if (v !== null) throw new Error(v);
      }),
      { numRuns: 150, seed: 7 },
    );
    expect(repairs).toBeGreaterThan(100);
  });

  it('fails when a copy may go to a node that is down', () => {
    vi.spyOn(TickPlanner.prototype, 'receiverOk').mockImplementation(function (this: TickPlanner, n: NodeState) {
      return !n.draining && n.inbound < this.ctx.config.maxTransfersPerNode;
    });
    expect(fc.check(fc.property(lossy, keepsCopies), { numRuns: 150, seed: 7, endOnFailure: true }).failed).toBe(true);
  });
});
