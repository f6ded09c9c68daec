/**
 * Random clusters for the planner's properties over whole plans (issue 18), and rounds of planning again on what a
 * plan leaves: shared by the band properties and the settling rounds' test.
 */
import fc from 'fast-check';
import type { Topology } from '../../cluster/contract';
import { DEFAULT_PLANNER_CONFIG, planToConvergence, type PlannerConfig } from '../../planner';
import { afterSteps, input, node, partition, topology } from './planner-topology';

export interface Case {
  t: Topology;
  config: PlannerConfig;
}

export const config: PlannerConfig = { ...DEFAULT_PLANNER_CONFIG, maxTransfersPerCluster: 4 };

/** Random clusters of 4 to 8 nodes in 1 to 3 zones, some joined empty, partitions of 2 or 3 copies. */
export const clusterArb: fc.Arbitrary<Case> = fc
  .record({
    n: fc.integer({ min: 4, max: 8 }),
    zones: fc.integer({ min: 1, max: 3 }),
    empty: fc.integer({ min: 0, max: 2 }),
    parts: fc.array(fc.record({ rf: fc.integer({ min: 2, max: 3 }), at: fc.nat(), step: fc.integer({ min: 1, max: 3 }), bytes: fc.integer({ min: 1, max: 300 }), pub: fc.integer({ min: 0, max: 80 }) }), {
      minLength: 6,
      maxLength: 40,
    }),
    threshold: fc.constantFrom(0.05, 0.1, 0.2),
  })
  .map(({ n, zones, empty, parts, threshold }) => {
    const nodes = Array.from({ length: n }, (_, i) => node(`n${i}`, { zone: `z${i % zones}` }));
    const holders = n - empty;
    const ps = parts.map((q, i) => {
      const copies: string[] = [];
      for (let k = 0; copies.length < Math.min(q.rf, holders); k++) {
        const id = `n${(q.at + k * q.step) % holders}`;
        if (!copies.includes(id)) copies.push(id);
        if (k > 3 * holders) break;
      }
      return partition(`q-${i}`, copies[0]!, copies.slice(1), { historyBytes: q.bytes * 1_000_000, publishRate: q.pub, deliveryRate: q.pub });
    });
    return { t: topology(nodes, ps), config: { ...config, threshold, maxTransfersPerCluster: 6 } };
  });


/**
 * Plans to convergence, each carried out, then planned again on what it leaves, as the loop does once its cooldowns
 * end: how many rounds propose something before one proposes nothing, or null when a placement comes back (or the
 * rounds pass 20), which would be moves traded back and forth for ever.
 */
export function rounds({ t: start, config: c }: Case): number | null {
  const seen = new Set<string>();
  let t = start;
  for (let r = 0; r <= 20; r++) {
    const key = JSON.stringify(t.partitions.map((p) => [p.owner, ...p.followers]));
    if (seen.has(key)) return null;
    seen.add(key);
    const steps = planToConvergence(input(t), c).steps;
    if (steps.length === 0) return r;
    t = afterSteps(t, steps);
  }
  return null;
}
