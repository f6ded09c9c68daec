import { afterEach, describe, expect, it, vi } from 'vitest';
import { bandWords, DEFAULT_PLANNER_CONFIG, dimensionBands, planNow, planToConvergence, validatePlannerConfig } from '../../planner';
import { BandMeter } from '../../planner/bands';
import { ClusterState } from '../../planner/state';
import { TickPlanner } from '../../planner/tick';
import { large, runScenario, SCENARIOS } from '../../bench/planner';
import { afterSteps, applySteps, input, node, partition, ring, topology } from './planner-topology';

afterEach(() => {
  vi.restoreAllMocks();
});

const config = { ...DEFAULT_PLANNER_CONFIG, maxTransfersPerCluster: 16 };

interface Figures {
  replicaMoves: number;
  bytesMoved: number;
  lowerBound: { moves: number; bytes: number };
  ratios: { bytes: number };
  bands: Record<string, { inside: boolean; node: string; deviation: number }>;
}

/** One of the planner bench's scenarios, run as the bench runs it. */
const scenario = (name: string): Figures => runScenario(SCENARIOS.find((s) => s.name === name)!) as unknown as Figures;
const MB = 2 ** 20;

/** The case issue 18 measures: 6 nodes, RF 3, 360 partitions of mixed sizes, 2 empty nodes added. */
function grown() {
  const t = ring(6, 2, 60);
  t.partitions.forEach((p, i) => Object.assign(p, { historyBytes: (1 + ((i * 7919) % 200)) * MB, publishRate: 1 + ((i * 13) % 10), deliveryRate: 1 + ((i * 13) % 10) }));
  return t;
}

describe('per-dimension bands', () => {
  it("reports each dimension's worst node against its band, with its share and the band in words", () => {
    const t = grown();
    const bands = dimensionBands(input(t), config);
    expect(bands.map((b) => b.dimension)).toEqual(['replicas', 'owned', 'disk', 'traffic']);
    // Before any move the new nodes hold nothing: below every band.
    for (const b of bands) expect(b).toMatchObject({ node: 'n6', load: 0, deviation: -1, inside: false });
    const replicas = bands[0]!;
    expect(replicas.share).toBe(135);
    expect(bandWords(replicas)).toBe('n6 holds 0.0 replicas, below its band 128 to 142 (share 135 ± 5.0%)');
    expect(bandWords(bands[2]!)).toMatch(/^n6 holds 0 MiB on disk, below its band \d+ MiB to \d+ MiB \(share \d+ MiB ± 5\.0%\)$/);
  });

  it('a plan says, per dimension, whether its worst node ends inside the band', () => {
    const t = grown();
    const plan = planToConvergence(input(t), config);
    const holders = applySteps(t, plan.steps);
    const after = topology(t.nodes, t.partitions.map((p) => ({ ...p, owner: holders.get(p.id)![0]!, followers: holders.get(p.id)!.slice(1) })));
    expect(plan.dimensions).toEqual(dimensionBands(input(after), config));
  });

  it('never narrower than one copy: a band of 5% of 12 copies still spans a copy each side', () => {
    const t = ring(3, 0, 4, 3);
    const replicas = dimensionBands(input(t), config)[0]!;
    expect(replicas).toMatchObject({ share: 12, low: 11, high: 13, inside: true });
  });

  it.each([
    [{ replicas: 0 }, /^bands\.replicas is 0: expected a fraction above 0 and below 1/],
    [{ disk: 1 }, /^bands\.disk is 1: expected a fraction above 0 and below 1/],
    [{ traffic: Number.NaN }, /^bands\.traffic is NaN/],
  ])('refuses bands %j that would oscillate or mean nothing', (bands, message) => {
    expect(validatePlannerConfig({ ...config, bands })).toMatch(message);
  });

  it('a node joining empty takes copies up to its replica band and its owner roles by handoff, not copies in their place', () => {
    // Ten nodes of 20 owned and 40 followed copies, one joins: its band is 51.8 to 57.3 copies (share 54.5 ± 5%).
    const joined = () => {
      const t = ring(10, 1, 20, 3, { historyBytes: 2 * MB, publishRate: 10, deliveryRate: 10 });
      const plan = planToConvergence(input(t), config);
      const moves = plan.steps.filter((s) => s.op === 'follower_move');
      return { moves: moves.length, bands: dimensionBands(input(afterSteps(t, plan.steps)), config) };
    };
    const { moves, bands } = joined();
    // The fewest copies that bring it inside its replica band (and every node inside every band).
    expect(moves).toBe(52);
    expect(bands.every((b) => b.inside)).toBe(true);
    // With the owner roles it lacks counted as copies to make up, it takes more than its band needs.
    vi.spyOn(ClusterState.prototype, 'ownerGap').mockReturnValue(0);
    expect(joined().moves).toBeGreaterThan(52);
  });

  it('at 1,000 nodes and 100,000 partitions the plan ends with every node inside every band, a node a hair outside brought in', () => {
    // A joining node ended 0.0005 of its share below its disk band: no move could lower the excess by the margin
    // (minImprovement), so a move that leaves both its nodes inside every band is taken whatever its gain.
    const t = large();
    const plan = planToConvergence(input(t), DEFAULT_PLANNER_CONFIG);
    expect(plan.dimensions?.filter((d) => !d.inside)).toEqual([]);
  });
});

describe('a node returning with retained copies', () => {
  it('takes its share from them: the band step leaves whole copies for nodes inside their bands until it has a slot', () => {
    // The bench's rejoin: n10 drained (its copies retained) and back. A band move of a whole copy between old nodes
    // while n10 was busy cost 14 times the bound that prices each retained copy at what it lacks.
    // The second: back with retained copies of half the partitions at 95% of their tail (issue #18 item 3).
    for (const name of ['rejoin-with-retained-copies', 'rejoin-half-at-95-percent']) {
      const r = scenario(name);
      expect(r.bytesMoved, name).toBeLessThanOrEqual(1.05 * r.lowerBound.bytes);
      expect(Object.values(r.bands).every((b) => b.inside), name).toBe(true);
    }
  });
});

describe('a node returning with retained copies of partitions an overfull node owns', () => {
  // Zones z1 {n0, n4}, z2 {n1, n3}, z3 {n2, n5}, one copy of each partition per zone: every z1 copy is on n0 while n4
  // was away, and n4 comes back holding retained copies (a tenth of a MB short) of the 4 partitions n0 owns. Only
  // n0's copies may go to n4, and a follower move takes only followers.
  const MB = 1_000_000;
  const returning = (retained = 4) => {
    const nodes = [['n0', 'z1'], ['n1', 'z2'], ['n2', 'z3'], ['n3', 'z2'], ['n4', 'z1'], ['n5', 'z3']].map(([id, zone]) => node(id!, { zone }));
    const parts = Array.from({ length: 12 }, (_, i) => {
      const [z2, z3] = i % 2 === 0 ? ['n1', 'n2'] : ['n3', 'n5'];
      const owner = i < 4 ? 'n0' : i < 8 ? z2 : z3;
      const p = partition(`q-${i}`, owner, ['n0', z2, z3].filter((c) => c !== owner), { historyBytes: 100 * MB });
      if (i < retained) p.retainedCopies = [{ node: 'n4', durableOffset: 0, removedAt: 0, retainedUntil: 1e12, bytesToCatchUp: MB / 10 }];
      return p;
    });
    return topology(nodes, parts);
  };

  it('takes them by a handoff first, then the copy as a follower\'s, before any whole copy', () => {
    const t = returning();
    const plan = planToConvergence(input(t), DEFAULT_PLANNER_CONFIG);
    const freed = plan.steps.filter((s) => s.op === 'owner_handoff' && s.from === 'n0' && /^frees n0's copy of q-\d to move to n4/.test(s.reason));
    const moves = plan.steps.filter((s) => s.op === 'follower_move');
    // Each freed partition's copy then moves from n0 to n4 at what the retained copy lacks, before any whole copy.
    expect(freed.length).toBeGreaterThanOrEqual(3);
    for (const h of freed) expect(moves.find((m) => m.partition === h.partition)).toMatchObject({ from: 'n0', to: 'n4', bytes: MB / 10 });
    expect(moves.findIndex((m) => m.bytes === 100 * MB)).toBe(freed.length);
    // 6 copies go to n4 (its zone's half); 3 whole ones, where every one was whole before (600 MB).
    expect(moves.reduce((a, m) => a + m.bytes, 0)).toBeLessThanOrEqual(3 * 100 * MB + 3 * (MB / 10));
    expect(dimensionBands(input(afterSteps(t, plan.steps)), DEFAULT_PLANNER_CONFIG).filter((b) => !b.inside)).toEqual([]);
  });

  it('while such a handoff runs, the receiver takes no whole copy, and the loop says why', () => {
    // The loop's next tick, the handoff freeing n0's copy of q-0 (n4's only retained copy) in flight: the loop copied a
    // partition whole to n4 meanwhile. A follower move elsewhere is in flight too, so no owner handoff balances roles.
    const running = input(returning(1), {
      inFlight: [
        { partition: 'q-0', op: 'owner_handoff', from: 'n0', to: 'n1', bytesRemaining: 0 },
        { partition: 'q-4', op: 'follower_move', from: 'n2', to: 'n5', bytesRemaining: 100 * MB },
      ],
    });
    const tick = planNow(running, DEFAULT_PLANNER_CONFIG);
    expect(tick.steps.filter((s) => s.op === 'follower_move' && s.to === 'n4' && s.bytes === 100 * MB)).toEqual([]);
    expect(tick.steps).toEqual([]);
    expect(tick.idleReason).toMatch(/^n4 takes no whole copy while a handoff frees a copy/);
  });
});

describe('the margin (minImprovement) never keeps a node outside a band that a move brings closer', () => {
  it.each([0.02, 0.05, 0.1])('at %s a join and mixed capacities end with every node inside every band', (minImprovement) => {
    // A move or handoff that takes no node further outside a band lowers the excess outside them, so nothing trades
    // it back: at 0.02 the joining node owned nothing (no handoff cleared the margin), at 0.1 it received nothing.
    for (const name of ['join-1-into-10', 'mixed-capacities']) {
      const s = SCENARIOS.find((x) => x.name === name)!;
      const r = runScenario({ ...s, config: { ...s.config, minImprovement } }) as { bands: Record<string, { inside: boolean; node: string; deviation: number }> };
      expect(Object.entries(r.bands).filter(([, b]) => !b.inside), name).toEqual([]);
    }
  });
});

describe('a node that scores high on traffic and disk', () => {
  it('keeps the copies its replica band needs while other nodes are above theirs or their share: the hot partitions take the fewest moves', () => {
    // The score step took cold copies from the nodes holding the hot partitions (the highest scores) until they fell
    // to the bottom of their replica band, then band moves between old nodes took copies back to them: 71 moves
    // where 52 suffice. Once every node was inside its replica band, n1 still gave 3 copies past its band's edge
    // and took retained ones back: 55.
    const r = scenario('hot-partitions');
    expect(r.replicaMoves).toBeLessThanOrEqual(1.05 * r.lowerBound.moves);
    expect(Object.values(r.bands).every((b) => b.inside)).toBe(true);
    vi.spyOn(BandMeter.prototype, 'belowReplicaBandWithout').mockReturnValue(false);
    expect(scenario('hot-partitions').replicaMoves).toBeGreaterThan(1.05 * r.lowerBound.moves);
  });
});

describe('the score step judges a source as after its handoffs', () => {
  it('mixed capacities: the old nodes, which still own every partition, do not give copies to make up owner roles', () => {
    // 8 nodes and 2 new ones of capacity 2: the old nodes scored above the band on the owner roles the handoffs take
    // from them after the follower moves, so the new ones took 200 copies where their replica band needs 190.
    const r = scenario('mixed-capacities');
    expect(r.replicaMoves).toBeLessThanOrEqual(1.05 * r.lowerBound.moves);
    expect(Object.values(r.bands).every((b) => b.inside)).toBe(true);
    vi.spyOn(TickPlanner.prototype, 'copySrcDev').mockImplementation(function (this: TickPlanner, n) {
      return this.dev(n);
    });
    expect(scenario('mixed-capacities').replicaMoves).toBeGreaterThan(1.05 * r.lowerBound.moves);
  });
});

describe('the band step fills a node short of copies and bytes with copies of the size it lacks', () => {
  it('mixed sizes: the new nodes reach both band edges together, not the count with small copies and then the bytes with large ones', () => {
    // Fewest bytes per unit of excess first took 9 small copies up to the count, then 5 large ones for the bytes:
    // 271 moves, 1.0504 times the bound.
    const r = scenario('join-2-into-6-mixed-sizes');
    expect(r.replicaMoves).toBeLessThanOrEqual(1.05 * r.lowerBound.moves);
    expect(r.ratios.bytes).toBeLessThanOrEqual(1.05);
    vi.spyOn(BandMeter.prototype, 'bandFit').mockReturnValue(0);
    vi.spyOn(BandMeter.prototype, 'bandSourceFit').mockReturnValue(0);
    expect(scenario('join-2-into-6-mixed-sizes').replicaMoves).toBeGreaterThan(1.05 * r.lowerBound.moves);
  });
});
