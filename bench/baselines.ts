/**
 * The planner bench's two baselines, run on the same cluster as the planner: a full round-robin re-spread like the
 * reassignment tools generate, and a count-only greedy balancer; each as a new placement, priced like a plan.
 */
import type { Partition, Topology } from '../cluster/contract';
import type { PlanInput, PlannerConfig } from '../planner';
import { ClusterState } from '../planner/state';
import { round } from './stats';

/** The topology after a baseline's new placement: partition id -> copies, owner first. */
function placed(t: Topology, placement: Map<string, string[]>): Topology {
  return {
    ...t,
    partitions: t.partitions.map((p) => {
      const c = placement.get(p.id)!;
      return { ...p, owner: c[0]!, followers: c.slice(1), learners: [], leaving: null } satisfies Partition;
    }),
  };
}

/** The nodes a baseline places copies on: live, neither marked draining nor drained by the input. */
function staying(input: PlanInput): string[] {
  const draining = new Set(input.draining ?? []);
  return input.topology.nodes.filter((n) => n.live && !n.draining && !draining.has(n.id)).map((n) => n.id);
}

export function baselineFigures(input: PlanInput, cfg: PlannerConfig, placement: Map<string, string[]>) {
  const draining = new Set(input.draining ?? []);
  const st = new ClusterState(input, cfg, draining);
  let moves = 0;
  let bytes = 0;
  for (const [i, p] of input.topology.partitions.entries()) {
    const before = new Set([p.owner, ...p.followers]);
    for (const n of placement.get(p.id)!) {
      if (before.has(n)) continue;
      moves++;
      bytes += st.bytesTo(i, st.nodeIndex.get(n)!);
    }
  }
  const after = new ClusterState({ ...input, topology: placed(input.topology, placement) }, cfg, draining);
  return { moves, bytes, maxDeviation: round(after.spread()) };
}

/** Kafka's reassignment tool style: every partition re-spread round robin over the nodes that stay. */
export function roundRobin(input: PlanInput): Map<string, string[]> {
  const ids = staying(input);
  return new Map(input.topology.partitions.map((p, i) => [p.id, Array.from({ length: 1 + p.followers.length }, (_, k) => ids[(i + k) % ids.length]!)]));
}

/** Count-only greedy: a follower copy from the node with the most copies to the one with the fewest, until they differ by one. */
export function greedyCount(input: PlanInput): Map<string, string[]> {
  const draining = new Set(input.draining ?? []);
  const placement = new Map(input.topology.partitions.map((p) => [p.id, [p.owner, ...p.followers]]));
  const stay = staying(input);
  const held = new Map<string, string[]>(input.topology.nodes.map((n) => [n.id, []]));
  for (const [p, c] of placement) for (const n of c) held.get(n)!.push(p);
  // Draining nodes give every copy to the node with the fewest.
  const fewest = (p: string): string | undefined => stay.filter((n) => !placement.get(p)!.includes(n)).sort((a, b) => held.get(a)!.length - held.get(b)!.length)[0];
  const move = (p: string, from: string, to: string): void => {
    const c = placement.get(p)!;
    c[c.indexOf(from)] = to;
    held.set(from, held.get(from)!.filter((x) => x !== p));
    held.get(to)!.push(p);
  };
  for (const d of draining) for (const p of [...held.get(d)!]) { const to = fewest(p); if (to) move(p, d, to); }
  for (;;) {
    const sorted = [...stay].sort((a, b) => held.get(b)!.length - held.get(a)!.length);
    const most = sorted[0]!;
    const least = sorted.at(-1)!;
    if (held.get(most)!.length - held.get(least)!.length <= 1) break;
    const p = held.get(most)!.find((q) => placement.get(q)![0] !== most && !placement.get(q)!.includes(least));
    if (p === undefined) break;
    move(p, most, least);
  }
  return placement;
}
