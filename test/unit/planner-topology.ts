/** Hand-built topologies for the planner's tests: contract-shaped records with the load fields the planner reads. */
import type { Node, Partition, Topology } from '../../cluster/contract';
import type { PartitionLoad, PlanInput } from '../../planner/types';

export type LoadedPartition = Partition & PartitionLoad;

export function node(id: string, extra: Partial<Node> = {}): Node {
  return {
    id,
    processId: `${id}-p1`,
    storageInstance: `${id}-s1`,
    live: true,
    downSince: null,
    capacity: 1,
    zone: 'z1',
    publishRate: 0,
    deliveryRate: 0,
    draining: false,
    ...extra,
  };
}

export function partition(id: string, owner: string, followers: string[], extra: Partial<LoadedPartition> = {}): LoadedPartition {
  return {
    id,
    kind: 'queue',
    owner,
    followers,
    learners: [],
    leaving: null,
    epoch: 1,
    generation: 1,
    replicationFactor: followers.length + 1,
    durability: { mode: 'majority_durable' },
    writeRequirement: Math.floor((followers.length + 1) / 2) + 1,
    history: [owner, ...followers].map((n) => ({ node: n, processId: `${n}-p1`, storageInstance: `${n}-s1`, suspended: false })),
    pendingRecovery: null,
    admission: 'open',
    boundary: null,
    retainedCopies: [],
    historyBytes: 1_000_000,
    publishRate: 10,
    deliveryRate: 10,
    ...extra,
  };
}

export function topology(nodes: Node[], partitions: Partition[]): Topology {
  return { contractVersion: '1', generation: 1, now: 0, nodes, partitions };
}

export function input(t: Topology, extra: Partial<PlanInput> = {}): PlanInput {
  return { topology: t, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: 0, ...extra };
}

/**
 * `loaded` nodes n0.. holding `perNode` owned partitions each (followers on the next nodes round the ring), plus
 * `empty` nodes that hold nothing: the new-node-joins case.
 */
export function ring(loaded: number, empty: number, perNode: number, rf = 3, extra: Partial<LoadedPartition> = {}): Topology {
  const nodes = Array.from({ length: loaded + empty }, (_, i) => node(`n${i}`));
  const parts: Partition[] = [];
  for (let i = 0; i < loaded * perNode; i++) {
    const o = i % loaded;
    const followers = Array.from({ length: rf - 1 }, (_, j) => `n${(o + j + 1) % loaded}`);
    parts.push(partition(`q-${i}`, `n${o}`, followers, extra));
  }
  return topology(nodes, parts);
}

/** Each partition's copies (owner first) after carrying out `steps` in order. */
export function applySteps(t: Topology, steps: { op: string; partition: string; from: string; to: string }[]): Map<string, string[]> {
  const holders = new Map(t.partitions.map((p) => [p.id, [p.owner, ...p.followers, ...p.learners, ...(p.leaving === null ? [] : [p.leaving])]]));
  for (const s of steps) {
    const h = holders.get(s.partition)!;
    if (s.op !== 'owner_handoff') h[h.indexOf(s.from)] = s.to;
    else {
      h[h.indexOf(s.to)] = s.from;
      h[0] = s.to;
    }
  }
  return holders;
}

/** The topology `steps` leave (follower moves, handoffs and replacements done): owner first, then followers. */
export function afterSteps(t: Topology, steps: { op: string; partition: string; from: string; to: string }[]): Topology {
  const holders = applySteps(t, steps);
  return { ...t, partitions: t.partitions.map((p) => ({ ...p, owner: holders.get(p.id)![0]!, followers: holders.get(p.id)!.slice(1) })) };
}

/**
 * Carries `steps` out in order on `t`'s holders: false at the first a follower move's source does not hold as a
 * follower or its target holds already, or a handoff's source does not own or its target does not follow.
 */
export function carriedOut(t: Topology, steps: readonly { op: string; partition: string; from: string | null; to: string }[]): boolean {
  const holders = new Map(t.partitions.map((p) => [p.id, { owner: p.owner, followers: new Set(p.followers) }]));
  for (const s of steps) {
    const p = holders.get(s.partition)!;
    if (s.op === 'owner_handoff') {
      if (p.owner !== s.from || !p.followers.has(s.to)) return false;
      p.followers.delete(s.to);
      p.followers.add(s.from);
      p.owner = s.to;
      continue;
    }
    if (s.from === null || !p.followers.has(s.from) || p.followers.has(s.to) || p.owner === s.to) return false;
    p.followers.delete(s.from);
    p.followers.add(s.to);
  }
  return true;
}
