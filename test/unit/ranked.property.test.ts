/**
 * The follower step's ranking kept across proposals (planner/balance.ts `Ranked`): after any sequence of changed
 * nodes it lists the same first k nodes, in the same order, as ranking every node again (`smallest`), so keeping
 * it changes no plan.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Ranked, smallest } from '../../planner/balance';
import type { NodeState } from '../../planner/state';

describe('the follower step ranking kept across proposals', () => {
  it('gives the first k nodes ranking them all again gives, after every change', () => {
    // Few distinct keys, so equal keys (ranked in node order) are common; a node with key 0 is not admitted.
    const key = fc.integer({ min: -4, max: 4 });
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.array(key, { minLength: 1, maxLength: 24 }),
        fc.constantFrom<1 | -1>(1, -1),
        fc.array(fc.tuple(fc.nat(), key), { maxLength: 40 }),
        (k, keys, sign, changes) => {
          const nodes = keys.map((_, index) => ({ index }) as NodeState);
          const by = Float64Array.from(keys);
          const admits = (n: NodeState) => by[n.index] !== 0;
          const ranked = new Ranked(by, sign, k, admits, nodes);
          const again = () => smallest(nodes.filter(admits), by, sign, k).map((n) => n.index);
          expect(ranked.first().map((n) => n.index)).toEqual(again());
          for (const [at, v] of changes) {
            const n = nodes[at % nodes.length]!;
            by[n.index] = v;
            ranked.update(n);
            expect(ranked.first().map((m) => m.index)).toEqual(again());
            expect(ranked.nodes).toEqual(nodes.filter(admits));
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });
});
