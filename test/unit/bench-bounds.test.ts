/**
 * The planner bench's lower bounds (bench/bounds.ts) against brute force over small random item sets: a bound above
 * the true optimum would flatter the planner, so each property is also run against a wrong bound and must fail.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fewestBytes, fewestBytesWithinMoves, fewestMoves, fewestMovesWithinBytes, nodeMoves, wholeCopies, type NodeNeed, type NodeNeeds } from '../../bench/bounds';

const RUNS = 300;

/**
 * Per node, every whole plan: for each count of copies, the fewest bytes of a subset of that size covering every
 * need. The dimensions of a node list the same copies in the same order (their bytes alike, their changes not).
 */
function plansOf(dims: NodeNeeds): Map<number, number> {
  const out = new Map<number, number>();
  const copies = dims[0]!.copies;
  for (let mask = 0; mask < 1 << copies.length; mask++) {
    const chosen = (d: NodeNeed) => d.copies.filter((_, i) => mask & (1 << i));
    if (dims.some((d) => chosen(d).reduce((a, c) => a + c.delta, 0) < d.need - 1e-12)) continue;
    const picked = chosen(dims[0]!);
    const bytes = picked.reduce((a, c) => a + c.bytes, 0);
    out.set(picked.length, Math.min(out.get(picked.length) ?? Infinity, bytes));
  }
  return out;
}

/** Across nodes: total moves -> fewest total bytes of a whole plan with that many moves. */
function exact(nodes: NodeNeeds[]): Map<number, number> {
  let acc = new Map([[0, 0]]);
  for (const n of nodes) {
    const next = new Map<number, number>();
    const plans = plansOf(n);
    for (const [m, b] of acc) for (const [k, c] of plans) next.set(m + k, Math.min(next.get(m + k) ?? Infinity, b + c));
    acc = next;
  }
  return acc;
}

const exactMovesWithin = (nodes: NodeNeeds[], cap: number): number => Math.min(...[...exact(nodes)].filter(([, b]) => b <= cap + 1e-9).map(([m]) => m));
const exactBytesWithin = (nodes: NodeNeeds[], cap: number): number => Math.min(...[...exact(nodes)].filter(([m]) => m <= cap).map(([, b]) => b));

/**
 * 1-3 nodes of 1-6 copies each, outside 1 or 2 dimensions (as a joining node lacks replicas and disk), every need
 * reachable by taking all of a node's copies.
 */
const nodesArb: fc.Arbitrary<NodeNeeds[]> = fc.array(
  fc
    .record({
      dims: fc.integer({ min: 1, max: 2 }),
      copies: fc.array(fc.record({ deltas: fc.tuple(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 100 })), bytes: fc.integer({ min: 1, max: 1000 }) }), { minLength: 1, maxLength: 6 }),
      shares: fc.tuple(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 100 })),
    })
    .map(({ dims, copies, shares }) =>
      Array.from({ length: dims }, (_, j): NodeNeed => {
        const mine = copies.map((c) => ({ delta: c.deltas[j]! / 100, bytes: c.bytes }));
        return { copies: mine, need: (mine.reduce((a, c) => a + c.delta, 0) * shares[j]!) / 100 };
      }),
    ),
  { minLength: 1, maxLength: 3 },
);

/** A cap factor of the separate bound: 1 (no slack) to 3. */
const factorArb = fc.integer({ min: 100, max: 300 }).map((f) => f / 100);

type Bound = (nodes: NodeNeeds[], cap: number) => number;

const sum = (nodes: NodeNeeds[], f: (n: NodeNeeds) => number): number => nodes.reduce((a, n) => a + f(n), 0);

function holdsForMoves(bound: Bound): boolean {
  return !fc.check(
    fc.property(nodesArb, factorArb, (nodes, factor) => {
      const cap = sum(nodes, fewestBytes) * factor;
      return bound(nodes, cap) <= exactMovesWithin(nodes, cap);
    }),
    { numRuns: RUNS, seed: 11 },
  ).failed;
}

function holdsForBytes(bound: Bound): boolean {
  return !fc.check(
    fc.property(nodesArb, factorArb, (nodes, factor) => {
      const cap = Math.floor(sum(nodes, nodeMoves) * factor);
      return bound(nodes, cap) <= exactBytesWithin(nodes, cap) + 1e-6;
    }),
    { numRuns: RUNS, seed: 11 },
  ).failed;
}

describe('bench lower bounds', () => {
  it('the separate bounds: fewest moves is exact for one dimension and never above the fewest for several, fewest bytes never above the cheapest whole plan', () => {
    fc.assert(
      fc.property(nodesArb, (nodes) => {
        for (const n of nodes) {
          const plans = plansOf(n);
          if (n.length === 1) expect(nodeMoves(n)).toBe(Math.min(...plans.keys()));
          else expect(nodeMoves(n)).toBeLessThanOrEqual(Math.min(...plans.keys()));
          expect(fewestBytes(n)).toBeLessThanOrEqual(Math.min(...plans.values()) * (1 + 1e-6));
        }
      }),
      { numRuns: RUNS, seed: 11 },
    );
  });

  it('with no cap the joint bounds are the separate ones', () => {
    fc.assert(
      fc.property(nodesArb, (nodes) => {
        expect(fewestMovesWithinBytes(nodes, Infinity)).toBe(sum(nodes, nodeMoves));
        expect(fewestBytesWithinMoves(nodes, Infinity)).toBeCloseTo(sum(nodes, fewestBytes), 6);
      }),
      { numRuns: RUNS, seed: 11 },
    );
  });

  it('the joint bounds never exceed the true optimum under their cap', () => {
    expect(holdsForMoves(fewestMovesWithinBytes)).toBe(true);
    expect(holdsForBytes(fewestBytesWithinMoves)).toBe(true);
  });

  it('a wrong bound fails the same properties (the properties can fail)', () => {
    // The moves of the fewest-bytes plan rounded up: a plan, not a bound, so above the optimum when a few large copies fit the cap.
    const bytesPlanMoves: Bound = (nodes) => sum(nodes, (n) => Math.ceil(n[0]!.copies.length * (fewestBytes(n) / n[0]!.copies.reduce((a, c) => a + c.bytes, 0))) || nodeMoves(n));
    expect(holdsForMoves(bytesPlanMoves)).toBe(false);
    // Whole copies at the fewest moves' prices, no fractions: the bytes of one plan, above the optimum when a cheaper set of the same size exists.
    const largestFirstBytes: Bound = (nodes) => sum(nodes, (n) => [...n[0]!.copies].sort((a, b) => b.delta - a.delta).slice(0, nodeMoves(n)).reduce((a, c) => a + c.bytes, 0));
    expect(holdsForBytes(largestFirstBytes)).toBe(false);
  });

  it('whole copies: a need of 2.25 copies of equal score change takes 3 of them, not a quarter of the third', () => {
    const node: NodeNeed = { need: 0.9, copies: Array.from({ length: 4 }, () => ({ delta: 0.4, bytes: 10 })) };
    expect(fewestMoves(node)).toBe(3);
    expect(fewestBytes([node])).toBeCloseTo(30, 6);
  });

  it('skewed sizes: one hot copy fixes the node alone, four cold ones fix it for 40% of its bytes', () => {
    const node: NodeNeed = { need: 1, copies: [{ delta: 1, bytes: 100 }, ...Array.from({ length: 4 }, () => ({ delta: 0.25, bytes: 10 }))] };
    expect(fewestMoves(node)).toBe(1);
    expect(fewestBytes([node])).toBeCloseTo(40, 6);
    // No plan of at most 42 bytes has fewer than the four cold copies; no plan of one move has fewer than 100 bytes.
    expect(fewestMovesWithinBytes([[node]], 42)).toBe(4);
    expect(fewestBytesWithinMoves([[node]], 1)).toBeCloseTo(100, 6);
    // Any three copies cost 120 or more; the relaxation prices three at 60 (a third of the hot one), so at 60 it says 3, not 4.
    expect(fewestMovesWithinBytes([[node]], 60)).toBe(3);
    expect(exactMovesWithin([[node]], 60)).toBe(4);
  });

  it('a node short of replicas and of bytes: the copies must meet both, so its bounds are those of the one that needs more', () => {
    // Two copies lacking, and 100 bytes: two small copies cover the count but not the bytes.
    const copies = [{ bytes: 10 }, { bytes: 10 }, { bytes: 60 }, { bytes: 60 }];
    const replicas: NodeNeed = { need: 2, copies: copies.map((c) => ({ delta: 1, bytes: c.bytes })) };
    const disk: NodeNeed = { need: 100, copies: copies.map((c) => ({ delta: c.bytes, bytes: c.bytes })) };
    expect(nodeMoves([replicas])).toBe(2);
    expect(nodeMoves([replicas, disk])).toBe(2);
    expect(fewestBytes([replicas])).toBeCloseTo(20, 6);
    expect(fewestBytes([replicas, disk])).toBeGreaterThanOrEqual(100 - 1e-6);
    expect(fewestBytes([replicas, disk])).toBeLessThanOrEqual(Math.min(...plansOf([replicas, disk]).values()));
  });

  it('whole copies of few sizes: a node short of 20 copies and 90 bytes among copies of 40 and of 2 takes 2 large ones at 20 moves, 1 at 26', () => {
    // The planner's hot partitions in small: the fractional bound prices part of a large copy at 20 moves.
    const sizes = [...Array.from({ length: 5 }, () => 40), ...Array.from({ length: 30 }, () => 2)];
    const replicas: NodeNeed = { need: 20, copies: sizes.map((b) => ({ delta: 1, bytes: b })) };
    const disk: NodeNeed = { need: 90, copies: sizes.map((b) => ({ delta: b, bytes: b })) };
    expect(fewestBytesWithinMoves([[replicas, disk]], 20)).toBeCloseTo(116, 6);
    expect(fewestBytes([replicas, disk])).toBeCloseTo(90, 6);
    const whole = wholeCopies([replicas, disk], 26)!;
    expect([whole[19], whole[20], whole[25], whole[26]]).toEqual([Infinity, 116, 116, 90]);
  });

  it('the whole-copy search is never above the cheapest whole plan of at most k copies, for every k (a count and disk bytes, some copies retained)', () => {
    // As the planner's nodes: every copy adds one replica and its bytes on disk, and costs its bytes or, where the
    // node retained it, less.
    const countAndDisk = fc
      .record({
        copies: fc.array(fc.record({ size: fc.integer({ min: 1, max: 60 }), retained: fc.integer({ min: 0, max: 3 }) }), { minLength: 1, maxLength: 9 }),
        count: fc.integer({ min: 0, max: 100 }),
        disk: fc.integer({ min: 1, max: 100 }),
      })
      .map(({ copies, count, disk }): NodeNeeds => {
        const priced = copies.map((c) => ({ size: c.size, bytes: c.retained === 0 ? c.size / 4 : c.size }));
        const total = priced.reduce((a, c) => a + c.size, 0);
        const bytes: NodeNeed = { need: (total * disk) / 100, copies: priced.map((c) => ({ delta: c.size, bytes: c.bytes })) };
        const replicas: NodeNeed = { need: Math.floor((priced.length * count) / 100), copies: priced.map((c) => ({ delta: 1, bytes: c.bytes })) };
        return replicas.need > 0 ? [replicas, bytes] : [bytes];
      });
    // Brute force: per count, the fewest bytes of a set of that size meeting every need, then at most k.
    const atMost = (n: NodeNeeds): number[] => {
      const plans = plansOf(n);
      const out: number[] = [];
      let best = Infinity;
      for (let k = 0; k <= n[0]!.copies.length; k++) out.push((best = Math.min(best, plans.get(k) ?? Infinity)));
      return out;
    };
    const holds = (bound: (n: NodeNeeds) => ArrayLike<number>) =>
      !fc.check(
        fc.property(countAndDisk, (n) => {
          const exactly = atMost(n);
          const got = bound(n);
          return exactly.every((b, k) => got[k]! <= b * (1 + 1e-9) + 1e-9);
        }),
        { numRuns: RUNS, seed: 11 },
      ).failed;
    expect(holds((n) => wholeCopies(n, n[0]!.copies.length)!)).toBe(true);
    // The property can fail: a byte above the cheapest plan at every k is refused.
    expect(holds((n) => atMost(n).map((b, k) => (k === 0 ? b : b + 1)))).toBe(false);
    // And the node's bound, the larger of this and the fractional one, stays below the cheapest plan.
    expect(!fc.check(fc.property(countAndDisk, (n) => fewestBytes(n) <= Math.min(...atMost(n)) * (1 + 1e-9) + 1e-9), { numRuns: RUNS, seed: 11 }).failed).toBe(true);
  });
});
