import { describe, expect, it } from 'vitest';
import type { Topology } from '../../cluster/contract';
import { DEFAULT_PLANNER_CONFIG, dimensionBands, planNow, planToConvergence, planWithFirstTick, predictMs, scoreNodes, validatePlannerConfig, zoneBoundNodes, type PlannerConfig } from '../../planner';
import { ClusterState } from '../../planner/state';
import { afterSteps, applySteps, input, node, partition, ring, topology } from './planner-topology';

const config: PlannerConfig = { ...DEFAULT_PLANNER_CONFIG };

/** Copies per node after applying `steps` to `t`. */
function copiesAfter(t: Topology, steps: { op: string; partition: string; from: string; to: string }[]): Map<string, string[]> {
  const byNode = new Map<string, string[]>(t.nodes.map((n) => [n.id, []]));
  for (const [p, ns] of applySteps(t, steps)) for (const n of ns) byNode.get(n)!.push(p);
  return byNode;
}

describe('planner: a new empty node joins', () => {
  it('planNow starts follower moves onto the empty node, within the per-node limit', () => {
    const plan = planNow(input(ring(4, 1, 10)), config);
    expect(plan.idleReason).toBeNull();
    expect(plan.steps).toHaveLength(config.maxTransfersPerNode);
    for (const s of plan.steps) {
      expect(s).toMatchObject({ op: 'follower_move', to: 'n4', bytes: 1_000_000 });
      expect(s.reason).toMatch(/n\d \(score 1\.250 > mean \+ 0\.1\) sheds to n4/);
    }
  });

  it('planToConvergence fills it (follower moves first, then owner handoffs) until every node is within the threshold', () => {
    const plan = planToConvergence(input(ring(4, 1, 10)), config);
    expect(plan.spreadBefore).toBe(1);
    expect(plan.spreadAfter).toBeLessThanOrEqual(config.threshold);
    const ops = plan.steps.map((s) => s.op);
    expect(ops.lastIndexOf('follower_move')).toBeLessThan(ops.indexOf('owner_handoff'));
    expect(plan.predictedMs).toBeGreaterThan(0);
  });

  it.each([
    ['a join', input(ring(4, 1, 10))],
    ['moves in flight at the cluster limit', input(ring(4, 1, 10), { inFlight: [{ partition: 'q-0', op: 'follower_move', from: 'n1', to: 'n4', bytesRemaining: 1 }] })],
    ['a recovery pending', input(ring(4, 1, 10, 3, { pendingRecovery: { epoch: 1, openedAt: 0, reason: 'test', failedOwner: 'n0' } }))],
    ['nothing to do', input(ring(4, 0, 10))],
  ])('planWithFirstTick: its first tick is planNow and its plan planToConvergence (%s)', (_what, i) => {
    const cfg = { ...config, maxTransfersPerCluster: 1 };
    const { plan, first } = planWithFirstTick(i, cfg);
    const now = planNow(i, cfg);
    expect(first).toEqual({ steps: now.steps, idleReason: now.idleReason });
    expect({ ...plan, planningMs: 0 }).toEqual({ ...planToConvergence(i, cfg), planningMs: 0 });
  });

  it('scores each dimension per capacity and relative to the mean: a node carrying its share scores 1', () => {
    const { mean, nodes } = scoreNodes(input(ring(4, 0, 10)), config);
    expect(mean).toBeCloseTo(1);
    for (const n of nodes) expect(n.total).toBeCloseTo(1);
  });
});

describe('planner: the policy', () => {
  it('proposes nothing while any recovery is pending, and says so', () => {
    const t = ring(4, 1, 10);
    t.partitions[7]!.pendingRecovery = { epoch: 1, openedAt: 0, reason: 'owner n3 lost', failedOwner: 'n3' };
    for (const plan of [planNow(input(t), config), planToConvergence(input(t), config)]) {
      expect(plan.steps).toEqual([]);
      expect(plan.idleReason).toMatch(/recovery pending on q-7 \(owner n3 lost\)/);
    }
  });

  it('proposes nothing on a cluster within the threshold', () => {
    const plan = planNow(input(ring(5, 0, 10)), config);
    expect(plan.steps).toEqual([]);
    expect(plan.idleReason).toMatch(/every node within the threshold/);
  });

  /** The demo's cluster once n6 has its share: 6 nodes in 3 zones, 14 queues and a stream, n1 owning one more than its share. */
  const settled = (): Topology => {
    const placed = [
      ['q-0', 'n2', 'n1', 'n6'], ['q-1', 'n1', 'n2', 'n6'], ['q-2', 'n2', 'n1', 'n3'], ['q-3', 'n3', 'n4', 'n5'], ['q-4', 'n2', 'n6', 'n4'],
      ['q-5', 'n5', 'n6', 'n2'], ['q-6', 'n3', 'n4', 'n5'], ['q-7', 'n4', 'n3', 'n5'], ['q-8', 'n3', 'n4', 'n5'], ['q-9', 'n6', 'n4', 'n1'],
      ['q-10', 'n1', 'n2', 'n6'], ['q-11', 'n4', 'n3', 'n5'], ['q-12', 'n6', 'n4', 'n1'], ['q-13', 'n5', 'n1', 'n2'], ['s-0', 'n1', 'n2', 'n3'],
    ];
    const nodes = Array.from({ length: 6 }, (_, i) => node(`n${i + 1}`, { zone: `z${(i % 3) + 1}` }));
    return topology(nodes, placed.map(([id, o, ...f]) => partition(id!, o!, f as string[], { kind: id!.startsWith('s') ? 'stream' : 'queue', historyBytes: 30e6 })));
  };

  it('says every node is within the threshold when only the granularity of whole owner roles is left, not that a stream cannot move', () => {
    const plan = planNow(input(settled()), DEFAULT_PLANNER_CONFIG);
    expect(dimensionBands(input(settled()), DEFAULT_PLANNER_CONFIG).every((d) => d.inside)).toBe(true);
    expect(plan.steps).toEqual([]);
    expect(plan.idleReason).toMatch(/^every node within the threshold/);
  });

  it('names the stream that keeps an owner role from moving where its owner is outside its owned band', () => {
    // n1 also owns q-2 and q-13, and all five it owns are streams: five owner roles against a share of 2.5, past the
    // band of one role either side, and none may move.
    const t = settled();
    for (const p of t.partitions) {
      if (p.id === 'q-2' || p.id === 'q-13') [p.owner, p.followers] = ['n1', [...p.followers.filter((n) => n !== 'n1'), p.owner]];
      if (p.owner === 'n1') p.kind = 'stream';
    }
    // Once the other nodes' roles even out, what is left is n1's, and the tick says which stream holds it.
    const plan = planNow(input(afterSteps(t, planToConvergence(input(t), DEFAULT_PLANNER_CONFIG).steps)), DEFAULT_PLANNER_CONFIG);
    expect(plan.steps).toEqual([]);
    expect(plan.idleReason).toMatch(/owned by n1 cannot be handed off: a stream \(streams do not move yet\)/);
  });

  it("fills a new node with the cluster's make-up, hot and cold copies both, until it holds its share of copies and of bytes", () => {
    const t = ring(4, 1, 10);
    for (const p of t.partitions.filter((_, i) => i % 4 === 0)) Object.assign(p, { historyBytes: 20_000_000, publishRate: 200 });
    const plan = planToConvergence(input(t), config);
    const toNew = plan.steps.filter((m) => m.to === 'n4' && m.op === 'follower_move');
    // Only the cheapest copies (by bytes per unit of score) would leave n4 with its share of copies and a sixth of its bytes.
    expect(new Set(toNew.map((m) => m.bytes))).toEqual(new Set([1_000_000, 20_000_000]));
    const left = afterSteps(t, plan.steps);
    const n4 = dimensionBands(input(left), config).filter((d) => d.node === 'n4');
    for (const d of n4) expect(d.inside).toBe(true);
  });


  it('a target holding a retained copy wins the tie and copies only its bytes to catch up', () => {
    const t = ring(4, 1, 10);
    t.partitions[5]!.retainedCopies = [{ node: 'n4', durableOffset: 10, removedAt: 0, retainedUntil: 1e9, bytesToCatchUp: 1234 }];
    const plan = planNow(input(t), config);
    expect(plan.steps[0]).toMatchObject({ partition: 'q-5', to: 'n4', bytes: 1234 });
    expect(plan.steps[0]!.reason).toMatch(/n4 holds a retained copy, so only 1234 bytes are copied/);
  });

  it('never moves onto a dead, draining or rejoining node, and leaves partitions with a change in flight alone', () => {
    const t = ring(4, 3, 10);
    t.nodes[4]!.live = false;
    t.nodes[5]!.draining = true;
    // n6 holds a suspended (rejoining) follower of q-0.
    const q0 = t.partitions[0]!;
    q0.followers.push('n6');
    q0.history.push({ node: 'n6', processId: 'n6-p2', storageInstance: 'n6-s1', suspended: true });
    t.partitions[1]!.learners = ['n5'];
    t.partitions[2]!.admission = 'closed';
    const plan = planNow(input(t), config);
    expect(plan.steps).toEqual([]);
    expect(planToConvergence(input(t), config).steps).toEqual([]);
  });

  it('respects cooldowns: a cooling node sheds no copy, a cooling partition is not touched', () => {
    const t = ring(4, 1, 10);
    const cooldowns = { nodes: { n0: 1000, n1: 1000, n2: 1000 }, partitions: { 'q-3': 1000, 'q-7': 1000 } };
    const plan = planNow(input(t, { cooldowns, now: 0 }), { ...config, maxTransfersPerCluster: 100, maxTransfersPerNode: 100 });
    expect(plan.steps.length).toBeGreaterThan(0);
    for (const s of plan.steps) {
      expect(s.from).toBe('n3');
      expect(['q-3', 'q-7']).not.toContain(s.partition);
    }
    const later = planNow(input(t, { cooldowns, now: 1000 }), config);
    expect(later.steps.some((s) => s.from !== 'n3')).toBe(true);
  });

  it('counts moves in flight: their transfer slots, their bytes, the load arriving at the target', () => {
    const t = ring(4, 1, 10);
    const inFlight = [
      { partition: 'q-0', op: 'follower_move' as const, from: 'n1', to: 'n4', bytesRemaining: 500_000 },
      { partition: 'q-1', op: 'follower_move' as const, from: 'n2', to: 'n4', bytesRemaining: 500_000 },
    ];
    const plan = planNow(input(t, { inFlight }), config);
    expect(plan.steps).toEqual([]);
    expect(plan.idleReason).toMatch(/n4 is .* below the mean but cannot take a transfer now \(n4 already receives 2 of 2 copies \(the per-node transfer limit of the sync budget\)\)/);
    const full = planNow(input(t, { inFlight }), { ...config, maxTransfersPerCluster: 2 });
    expect(full.idleReason).toMatch(/cluster transfer limit reached: 2 of 2/);
    const { nodes } = scoreNodes(input(t, { inFlight }), config);
    expect(nodes.find((n) => n.node === 'n4')!.sync).toBeGreaterThan(0);
    expect(nodes.find((n) => n.node === 'n4')!.followed).toBeGreaterThan(0);
  });

  it('keeps the copies of a partition in distinct zones', () => {
    // Six nodes in three zones, each partition once per zone; the new node n6 is in z0.
    const nodes = Array.from({ length: 6 }, (_, i) => node(`n${i}`, { zone: `z${i % 3}` }));
    nodes.push(node('n6', { zone: 'z0' }));
    const parts = Array.from({ length: 30 }, (_, i) => {
      const o = i % 6;
      return partition(`q-${i}`, `n${o}`, [`n${(o + 1) % 6}`, `n${(o + 2) % 6}`]);
    });
    const t = topology(nodes, parts);
    const plan = planToConvergence(input(t), config);
    expect(plan.steps.length).toBeGreaterThan(0);
    const zone = new Map(nodes.map((n) => [n.id, n.zone]));
    for (const s of plan.steps.filter((s) => s.op === 'follower_move')) expect(zone.get(s.from)).toBe('z0');
  });

  it("brings a zone's only node inside the band by handing off its owner roles, when the zone rule holds every copy on it", () => {
    // n1 and n3 are the only nodes of z1 and z3: each holds a copy of every partition, none of which may leave its
    // zone. n1 owns half of them.
    const nodes = [node('n1', { zone: 'z1' }), node('n2', { zone: 'z2' }), node('n3', { zone: 'z3' }), node('n5', { zone: 'z2' })];
    const pairs = [['n2', 'n3'], ['n5', 'n3']] as const;
    const parts = Array.from({ length: 12 }, (_, i) => {
      const [a, b] = pairs[i % 2]!;
      return i < 6 ? partition(`q-${i}`, 'n1', [a, b]) : partition(`q-${i}`, a, ['n1', b]);
    });
    const t = topology(nodes, parts);
    const before = scoreNodes(input(t), config).nodes.find((n) => n.node === 'n1')!.total;
    expect(before - 1).toBeGreaterThan(config.threshold);
    const plan = planToConvergence(input(t), config);
    expect(plan.steps.filter((s) => s.op === 'follower_move' && s.from === 'n1')).toEqual([]);
    const shed = plan.steps.filter((s) => s.op === 'owner_handoff' && s.from === 'n1');
    expect(shed.length).toBeGreaterThan(0);
    // The owned rule hands n1's first roles to n3, which owns none; then the total sheds the rest.
    expect(shed.map((s) => s.reason)).toContainEqual(expect.stringMatching(/^n1 \(score \d\.\d+ > mean \+ 0\.1\) hands an owner role to n\d \(score \d\.\d+( < mean - 0\.1)?\), an admitted follower below the mean/));
    // Past the receivers' owned band: owner roles are all n1 can shed, and the bands do not hold that back.
    expect(plan.spreadAfter).toBeLessThanOrEqual(config.threshold);
    // The plan's result is a fixed point: the owned-count rule does not hand ownership back onto n1.
    expect(planToConvergence(input(afterSteps(t, plan.steps)), config).steps).toEqual([]);
    // n1 just received copies (a repair put them there): cooling, it sheds no copy, but its owner roles still go.
    const cooling = planToConvergence(input(t, { cooldowns: { nodes: { n1: 1e12 }, partitions: {} } }), config);
    expect(cooling.steps.filter((s) => s.from === 'n1').map((s) => s.op)).toEqual(shed.map(() => 'owner_handoff'));
  });

  it('a node below the band pulls an owner role from one above the mean when no copy can move (every node holds every partition)', () => {
    // Owned counts are even; n1's partitions are hot and n3's cold, so the totals are not: n3 is below the band.
    const nodes = [node('n1', { zone: 'z1' }), node('n2', { zone: 'z2' }), node('n3', { zone: 'z3' })];
    const owners = ['n1', 'n1', 'n2', 'n2', 'n3', 'n3'];
    const rates = [60, 60, 50, 50, 0, 0];
    const t = topology(nodes, owners.map((o, i) => partition(`q-${i}`, o, ['n1', 'n2', 'n3'].filter((n) => n !== o), { deliveryRate: rates[i]! })));
    expect(scoreNodes(input(t), config).nodes.find((n) => n.node === 'n3')!.total).toBeLessThan(1 - config.threshold);
    const plan = planToConvergence(input(t), config);
    expect(plan.steps[0]).toMatchObject({ op: 'owner_handoff', from: 'n1', to: 'n3', reason: expect.stringMatching(/^n1 \(score 1\.\d+\) hands an owner role to n3 \(score 0\.\d+ < mean - 0\.1\)/) });
    expect(plan.spreadAfter).toBeLessThanOrEqual(config.threshold);
  });

  it("measures a zone's only node against what its zone must hold, not against its capacity's share", () => {
    // n3 is z3's only node and holds a copy of every partition, as the zone rule has it; n4 joins z1 empty.
    const nodes = [node('n1', { zone: 'z1' }), node('n2', { zone: 'z2' }), node('n3', { zone: 'z3' }), node('n5', { zone: 'z2' }), node('n4', { zone: 'z1' })];
    const t = topology(nodes, Array.from({ length: 12 }, (_, i) => partition(`q-${i}`, i % 2 ? 'n2' : 'n5', ['n1', 'n3'])));
    // Its replica share is every partition, where its capacity's share would be 7.2 of 36 copies: nothing holds it above a band.
    expect(scoreNodes(input(t), config).nodes.find((n) => n.node === 'n3')!.bands!.replicas).toMatchObject({ load: 12, share: 12, inside: true });
    expect(zoneBoundNodes(input(t), config)).toEqual([]);
    const plan = planToConvergence(input(t), config);
    expect(plan.steps.filter((s) => s.from === 'n3')).toEqual([]);
    const left = afterSteps(t, plan.steps);
    // Every node ends inside the score's band and every dimension's band, n3 too, and planning again proposes nothing.
    const after = scoreNodes(input(left), config).nodes;
    expect(after.filter((n) => Math.abs(n.total - 1) > config.threshold).map((n) => n.node)).toEqual([]);
    expect(after.flatMap((n) => Object.entries(n.bands!).filter(([, b]) => !b.inside).map(([d]) => `${n.node} ${d}`))).toEqual([]);
    expect(planToConvergence(input(left), config).steps).toEqual([]);
    // z2's two nodes share the 12 copies z2 holds, 6 each: n3's copies leave no excess for them to take up.
    expect(after.find((n) => n.node === 'n2')!.bands!.replicas).toMatchObject({ load: 6, share: 6 });
  });

  it('respects capacities: a node of capacity 2 ends with about twice the copies of a node of capacity 1', () => {
    const t = ring(4, 0, 30);
    t.nodes.push(node('n4', { capacity: 2 }), node('n5', { capacity: 1 }));
    const plan = planToConvergence(input(t), { ...config, threshold: 0.05 });
    const copies = copiesAfter(t, plan.steps);
    const big = copies.get('n4')!.length;
    const small = copies.get('n5')!.length;
    expect(big / small).toBeGreaterThan(1.7);
    expect(big / small).toBeLessThan(2.3);
  });

  it('drains a node: owners handed off first, then every follower copy moves, and the node ends empty', () => {
    const t = ring(6, 0, 8);
    const plan = planToConvergence(input(t, { draining: ['n2'] }), config);
    const ops = plan.steps.filter((s) => s.from === 'n2').map((s) => s.op);
    expect(ops.lastIndexOf('owner_handoff')).toBeLessThan(ops.indexOf('follower_move'));
    for (const s of plan.steps) expect(s.to).not.toBe('n2');
    const holders = new Map(t.partitions.map((p) => [p.id, new Set([p.owner, ...p.followers])]));
    for (const s of plan.steps) {
      const h = holders.get(s.partition)!;
      if (s.op === 'follower_move') {
        h.delete(s.from);
        h.add(s.to);
      }
    }
    for (const [p, h] of holders) expect(h.has('n2'), p).toBe(false);
    expect(plan.steps.filter((s) => s.from === 'n2')[0]!.reason).toMatch(/^drain n2: owner handed to/);
  });

  it('drains a node that is down: every follower copy moves off it; what it owns waits for ordinary recovery', () => {
    const t = ring(6, 0, 8);
    t.nodes.find((n) => n.id === 'n2')!.live = false;
    const owned = t.partitions.filter((p) => p.owner === 'n2');
    // Recovery has moved ownership off n2 for all but one of the partitions it owned.
    for (const p of owned.slice(1)) [p.owner, p.followers[0]] = [p.followers[0]!, p.owner];
    const plan = planToConvergence(input(t, { draining: ['n2'] }), config);
    const off = plan.steps.filter((s) => s.from === 'n2');
    expect(off.every((s) => s.op === 'follower_move')).toBe(true);
    expect(new Set(off.map((s) => s.partition))).toEqual(new Set(t.partitions.filter((p) => p.followers.includes('n2')).map((p) => p.id)));
    // A down node that still owns a partition: the drain says what it waits for.
    const one = topology([node('n1'), node('n2', { live: false, draining: true }), node('n3'), node('n4')], [partition('q-a', 'n2', ['n1', 'n3'])]);
    const rest = planNow(input(one, { draining: ['n2'] }), { ...config, threshold: 100 });
    expect(rest.steps).toEqual([]);
    expect(rest.idleReason).toBe('drain of n2: n2 is down and owns q-a: ordinary recovery moves its ownership first');
  });
});

describe('planner: predicted time', () => {
  it('is the busiest receiver, or all bytes over the receivers the cluster limit lets run together', () => {
    const move = (to: string, bytes: number) => ({ op: 'follower_move' as const, partition: 'q', from: 'n0', to, bytes, reason: '' });
    const c = { ...config, syncBytesPerSec: 1000, maxTransfersPerCluster: 2 };
    // One receiver: its bytes at its rate.
    expect(predictMs([move('a', 3000), move('a', 1000)], c)).toBe(4000);
    // Four receivers, two at a time: the whole volume over two.
    expect(predictMs([move('a', 1000), move('b', 1000), move('c', 1000), move('d', 1000)], c)).toBe(2000);
    // Handoffs copy nothing.
    expect(predictMs([{ ...move('a', 0), op: 'owner_handoff' }], c)).toBe(0);
  });
});

describe('planner: configuration', () => {
  it.each([
    [{ weights: { ...config.weights, history: -1 } }, /^weights\.history is -1: expected a finite number >= 0/],
    [{ weights: { owned: 0, followed: 0, history: 0, traffic: 0, sync: 0 } }, /weights are all 0/],
    [{ threshold: 0 }, /^threshold is 0: .*back and forth/],
    [{ minImprovement: 0 }, /^minImprovement is 0: expected a number > 0/],
    [{ maxTransfersPerNode: 0 }, /^maxTransfersPerNode is 0: expected an integer >= 1/],
    [{ maxTransfersPerCluster: 1.5 }, /^maxTransfersPerCluster is 1.5/],
    [{ nodeCooldownMs: -1 }, /^nodeCooldownMs is -1: expected milliseconds >= 0/],
    [{ partitionCooldownMs: Number.NaN }, /^partitionCooldownMs is NaN/],
    [{ historyHalfBytes: 0 }, /^historyHalfBytes is 0/],
    [{ syncBytesPerSec: -5 }, /^syncBytesPerSec is -5/],
  ])('refuses %j naming the setting', (change, message) => {
    const bad = { ...config, ...change } as PlannerConfig;
    expect(validatePlannerConfig(bad)).toMatch(message);
    expect(() => planNow(input(ring(3, 1, 3)), bad)).toThrow(/^invalid planner config: /);
  });

  it('accepts the defaults', () => {
    expect(validatePlannerConfig(DEFAULT_PLANNER_CONFIG)).toBeNull();
  });
});

describe('planner state: copy lists', () => {
  it('keeps every copy and role of partitions with more copies than a row first holds, moves in flight included', () => {
    const nodes = Array.from({ length: 9 }, (_, i) => node(`n${i}`));
    const wide = partition('q-1', 'n0', ['n1', 'n2', 'n3', 'n4'], { learners: ['n5'] });
    wide.history.find((h) => h.node === 'n4')!.suspended = true;
    const t = topology(nodes, [partition('q-0', 'n0', ['n1', 'n2']), wide, partition('q-2', 'n3', ['n4', 'n5'])]);
    const st = new ClusterState(
      input(t, { inFlight: [{ partition: 'q-2', op: 'follower_move', from: 'n4', to: 'n8', bytesRemaining: 5 }, { partition: 'q-0', op: 'follower_move', from: null, to: 'n7', bytesRemaining: 5 }] }),
      config,
      new Set(),
    );
    const ids = (ns: number[]): string[] => ns.map((n) => st.nodes[n]!.id);
    expect([0, 1, 2].map((p) => ids(st.copies(p)))).toEqual([
      ['n0', 'n1', 'n2', 'n7'],
      ['n0', 'n1', 'n2', 'n3', 'n4', 'n5'],
      ['n3', 'n5', 'n8'],
    ]);
    // Suspended n4 and learner n5 hold copies of q-1 but are not counted followers; neither are arriving copies.
    expect([0, 1, 2].map((p) => ids(st.followers(p)))).toEqual([['n1', 'n2'], ['n1', 'n2', 'n3'], ['n5']]);
    expect(st.nodes.map((n) => n.parts.length)).toEqual([2, 2, 2, 2, 1, 2, 0, 1, 1]);
  });

  it('a handoff puts the former owner where the new owner was among the followers, a follower move puts the target where the source was', () => {
    const t = topology(Array.from({ length: 5 }, (_, i) => node(`n${i}`)), [partition('q-0', 'n0', ['n1', 'n2', 'n3'])]);
    const st = new ClusterState(input(t), config, new Set());
    st.handoff(0, 0, 2);
    expect([st.owner[0], st.followers(0)]).toEqual([2, [1, 0, 3]]);
    st.followerMove(0, 1, 4);
    expect([st.owner[0], st.followers(0)]).toEqual([2, [4, 0, 3]]);
  });
});

describe('planner: an operator pins partitions and excludes nodes', () => {
  const alice = (reason: string) => ({ by: 'alice', reason });

  it('an excluded node that joined empty receives nothing, and the idle reason names its exclusion', () => {
    const plan = planNow(input(ring(4, 1, 10), { excluded: { n4: alice('burn-in test') } }), config);
    expect(plan.steps).toEqual([]);
    expect(plan.idleReason).toMatch(/^n4 is \d\.\d+ below the mean but excluded by alice: burn-in test$/);
  });

  it('with every partition pinned nothing moves, and the idle reason names a pin', () => {
    const t = ring(4, 1, 10);
    const pinned = Object.fromEntries(t.partitions.map((p) => [p.id, alice('audit')]));
    const plan = planToConvergence(input(t, { pinned }), config);
    expect(plan.steps).toEqual([]);
    expect(plan.idleReason).toMatch(/no follower move can start: q-\d+ on n\d+ cannot move: pinned by alice: audit$/);
  });

  it('plans the rest of the cluster around a pin and an exclusion', () => {
    const t = ring(4, 2, 10);
    const plan = planToConvergence(input(t, { pinned: { 'q-0': alice('audit') }, excluded: { n5: alice('burn-in'), n1: alice('slow disk') } }), config);
    expect(plan.steps.length).toBeGreaterThan(0);
    for (const s of plan.steps) {
      expect(s.partition).not.toBe('q-0');
      expect([s.from, s.to]).not.toContain('n5');
      expect([s.from, s.to]).not.toContain('n1');
    }
  });
});
