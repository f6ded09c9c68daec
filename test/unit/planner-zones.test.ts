/**
 * Each zone's share of the copies under the zone rule (planner/zones.ts): a zone holds what its capacity's share
 * says unless the rule bounds it, and the shares always add up to the copies the nodes hold.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { zoneFactors, type ZoneInput } from '../../planner/zones';

/** Nodes as [zone, capacity], partitions as the node indexes of their copies (replication factor = their count). */
function factors(nodes: [string, number][], parts: number[][], stays = nodes.map(() => true)): number[] {
  const stride = 4;
  const copyNode = new Int32Array(parts.length * stride);
  parts.forEach((p, i) => copyNode.set(p, i * stride));
  const input: ZoneInput = {
    zone: nodes.map(([z]) => z),
    cap: nodes.map(([, c]) => c),
    stays,
    rf: Uint8Array.from(parts, (p) => p.length),
    copyCount: Uint8Array.from(parts, (p) => p.length),
    copyNode,
    stride,
    total: parts.reduce((s, p) => s + p.length, 0),
  };
  return Array.from(zoneFactors(input));
}

describe('zone shares', () => {
  it("a zone's only node holding a copy of every partition has every partition as its share", () => {
    // The demo's zones: z1 {n1, n4}, z2 {n2, n5}, z3 {n3}; three copies, one in each zone, of 15 partitions.
    const nodes: [string, number][] = [['z1', 1], ['z2', 1], ['z3', 1], ['z1', 1], ['z2', 1]];
    const parts = Array.from({ length: 15 }, (_, i) => [i % 2 ? 0 : 3, i % 3 ? 1 : 4, 2]);
    const f = factors(nodes, parts);
    // 45 copies over 5 nodes is 9 per node by capacity; by the rule z3 holds 15 and the others 7.5 each.
    expect(f.map((x) => x * 9)).toEqual([7.5, 7.5, 15, 7.5, 7.5].map((x) => expect.closeTo(x, 6)));
  });

  it('leaves plain capacity where the rule binds nothing: one zone, or zones as large as their shares', () => {
    expect(factors([['z1', 1], ['z1', 2]], [[0, 1], [0, 1]])).toEqual([1, 1]);
    // Two zones of two nodes, two copies a partition, one in each: each zone's share is half, as its capacity.
    const even = factors([['a', 1], ['b', 1], ['a', 1], ['b', 1]], [[0, 1], [2, 3], [0, 3], [2, 1]]);
    expect(even).toEqual([1, 1, 1, 1].map((x) => expect.closeTo(x, 9)));
  });

  it('bounds a zone by what it holds now where its spread is already uneven', () => {
    // Three zones, three copies; partition 2 has two copies in z2 and none in z3, which the rule lets it keep.
    const nodes: [string, number][] = [['z1', 1], ['z2', 1], ['z2', 1], ['z3', 1]];
    const f = factors(nodes, [[0, 1, 3], [0, 2, 3], [0, 1, 2]]);
    // z1 must hold one copy of each (3), z3 at least 2 (it holds 2), at most 3; z2 at least 2 (one each of the two
    // spread ones, and it may keep its second copy of partition 2), at most 4. 9 copies by capacity: 2.25 a node.
    const share = f.map((x) => x * 2.25);
    expect(share[0]).toBeCloseTo(3, 6);
    expect(share[1]! + share[2]!).toBeGreaterThanOrEqual(2 - 1e-9);
    expect(share[3]).toBeGreaterThanOrEqual(2 - 1e-9);
    expect(share.reduce((a, b) => a + b)).toBeCloseTo(9, 6);
  });

  it('a node that does not stay keeps the factor 1, and its zone counts no capacity', () => {
    const f = factors([['z1', 1], ['z2', 1], ['z2', 1]], [[0, 1], [0, 2]], [true, true, false]);
    expect(f[2]).toBe(1);
    // z1 and z2 each hold one copy of both partitions: one node each, equal shares.
    expect(f[0]).toBeCloseTo(f[1]!, 9);
  });

  it('the shares add up to the copies held, and none is zero', () => {
    const arb = fc.record({
      zones: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 3, maxLength: 7 }),
      caps: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 7, maxLength: 7 }),
      parts: fc.array(fc.shuffledSubarray([0, 1, 2, 3, 4, 5, 6], { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 20 }),
    });
    fc.assert(
      fc.property(arb, ({ zones, caps, parts }) => {
        const nodes = zones.map((z, i): [string, number] => [`z${z}`, caps[i]!]);
        const ps = parts.map((p) => p.filter((n) => n < nodes.length)).filter((p) => p.length > 0);
        const f = factors(nodes, ps);
        const total = ps.reduce((s, p) => s + p.length, 0);
        const cap = nodes.reduce((s, [, c]) => s + c, 0);
        const shares = f.map((x, i) => (x * nodes[i]![1] * total) / cap);
        return Math.abs(shares.reduce((a, b) => a + b, 0) - total) < 1e-6 && f.every((x) => x > 0);
      }),
      { numRuns: 300, seed: 18 },
    );
  });
});
