/**
 * Per-dimension bands over whole plans (issue 18), on random clusters. Inside every band whenever some placement is:
 * checked by brute force on tiny clusters. Zones as a spread: no partition's copies end spread over zones less
 * evenly than they started. No oscillation: planning again on what a plan leaves, round after round, ends and never
 * returns to a placement it left. Each is also run against the planner with its rule taken out, where it must fail.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Topology } from '../../cluster/contract';
import { planToConvergence, scoreNodes } from '../../planner';
import { BandMeter } from '../../planner/bands';
import { TickPlanner } from '../../planner/tick';
import { clusterArb, config, rounds, type Case } from './planner-rounds';
import { afterSteps, input, node, partition, topology } from './planner-topology';

afterEach(() => {
  vi.restoreAllMocks();
});

/** Per partition, its copies in the zone holding the most less those in the zone holding the fewest (zones with a node). */
function zoneSpread(t: Topology, copies: string[]): number {
  const zoneOf = new Map(t.nodes.map((n) => [n.id, n.zone]));
  const count = new Map([...new Set(zoneOf.values())].map((z) => [z, 0]));
  for (const c of copies) count.set(zoneOf.get(c)!, count.get(zoneOf.get(c)!)! + 1);
  return Math.max(...count.values()) - Math.min(...count.values());
}

/** Tiny clusters: 3 or 4 nodes in 1 or 2 zones, 3 partitions of 2 copies of random size and traffic. */
const tinyArb = fc
  .record({
    n: fc.integer({ min: 3, max: 4 }),
    zones: fc.integer({ min: 1, max: 2 }),
    parts: fc.array(fc.record({ o: fc.nat(3), f: fc.nat(3), bytes: fc.integer({ min: 1, max: 300 }), pub: fc.integer({ min: 0, max: 80 }) }), {
      minLength: 3,
      maxLength: 3,
    }),
  })
  .map(({ n, zones, parts }) => {
    const nodes = Array.from({ length: n }, (_, i) => node(`n${i}`, { zone: `z${i % zones}` }));
    const placed = (place: [number, number][]): Topology =>
      topology(
        nodes,
        parts.map((q, i) =>
          partition(`q-${i}`, `n${place[i]![0]}`, [`n${place[i]![1]}`], { historyBytes: q.bytes * 1_000_000, publishRate: q.pub, deliveryRate: q.pub }),
        ),
      );
    return { t: placed(parts.map((q) => [q.o % n, (q.o % n) + 1 + (q.f % (n - 1))].map((x) => x % n) as [number, number])), placed, n };
  });

/** Every node that stays inside every band of the dimensions, as `rebalancer nodes` shows them. */
function insideEveryBand(t: Topology): boolean {
  return scoreNodes(input(t), config).nodes.every((x) => x.bands === null || Object.values(x.bands).every((b) => b.inside));
}

/**
 * How many of the tiny clusters have a placement with every node inside every band, reachable by the zone rule (no
 * partition spread over zones less evenly than it starts), and how many of those the plan to convergence leaves
 * outside one.
 */
function bandMisses(runs: number): { exist: number; missed: number } {
  let exist = 0;
  let missed = 0;
  for (const { t, placed, n } of fc.sample(tinyArb, { seed: 18, numRuns: runs })) {
    const pairs: [number, number][] = [];
    for (let a = 0; a < n; a++) for (let b = 0; b < n; b++) if (a !== b) pairs.push([a, b]);
    const spreads = t.partitions.map((p) => zoneSpread(t, [p.owner, ...p.followers]));
    let any = false;
    for (const x of pairs) {
      for (const y of pairs) {
        for (const z of pairs) {
          const c = placed([x, y, z]);
          if (c.partitions.some((p, i) => zoneSpread(c, [p.owner, ...p.followers]) > Math.max(1, spreads[i]!))) continue;
          if ((any = insideEveryBand(c))) break;
        }
        if (any) break;
      }
      if (any) break;
    }
    if (!any) continue;
    exist++;
    if (!insideEveryBand(afterSteps(t, planToConvergence(input(t), config).steps))) missed++;
  }
  return { exist, missed };
}

describe('planner properties: inside every band whenever a placement is', () => {
  it('a plan to convergence leaves every node inside every band where brute force finds a placement that does', () => {
    const { exist, missed } = bandMisses(200);
    expect(exist).toBeGreaterThan(150);
    expect(missed).toBe(0);
  });

  it('fails without owner handoffs that mend the owned and traffic bands whatever the total score says', () => {
    vi.spyOn(BandMeter.prototype, 'roleExcessFalls').mockReturnValue(false);
    expect(bandMisses(200).missed).toBeGreaterThan(5);
  });
});

describe('planner properties: zones as a spread', () => {
  const neverWorse = ({ t, config: c }: Case): boolean => {
    const after = afterSteps(t, planToConvergence(input(t), c).steps);
    return t.partitions.every((p, i) => {
      const q = after.partitions[i]!;
      const before = zoneSpread(t, [p.owner, ...p.followers]);
      // A partition already as even as its copies allow (1 apart) may move within that.
      return zoneSpread(after, [q.owner, ...q.followers]) <= Math.max(1, before);
    });
  };

  it("no partition's copies end spread over zones less evenly than they started", () => {
    fc.assert(fc.property(clusterArb, neverWorse), { numRuns: 100, seed: 18 });
  });

  it('fails with the zone rule taken out', () => {
    vi.spyOn(TickPlanner.prototype, 'canReceive').mockImplementation(function (this: TickPlanner, p, to) {
      return !this.st.holds(p, to.index);
    });
    expect(fc.check(fc.property(clusterArb, neverWorse), { numRuns: 100, seed: 18 }).failed).toBe(true);
  });
});

describe('planner properties: no oscillation', () => {
  it('planning again on what a plan leaves proposes nothing: every plan is a fixed point', () => {
    // 400 of 400 since settling rounds read the zone shares again and roles are routed through a follower; 385 before
    // those, 329 before the plan settled (planner-settling.test.ts).
    const counts = fc.sample(clusterArb, { seed: 18, numRuns: 400 }).map(rounds);
    expect(counts.filter((r) => r === null || r > 1)).toEqual([]);
  });

  it('fails with the band guard taken out of owner handoffs (a handoff by the total from inside the band takes a node out of its owned band)', () => {
    vi.spyOn(BandMeter.prototype, 'roleKeeps').mockReturnValue(true);
    expect(fc.sample(clusterArb, { seed: 18, numRuns: 400 }).some((c) => rounds(c) === null)).toBe(true);
  });
});
