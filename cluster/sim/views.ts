/**
 * Reads: topology, nodes, partition records, replication progress, the sync budget and the compact state
 * breach reports carry.
 */
import {
  CONTRACT_VERSION,
  type Node,
  type NodesView,
  type Partition,
  type PartitionView,
  type Progress,
  type ReplicaProgress,
  type ReplicaRole,
  type SyncBudget,
  type Topology,
  type TopologyChanges,
  type TopologyPage,
} from '../contract';
import type { ClusterSim } from './sim';
import { logNow, materialize } from './anchor';
import { serving } from './replication';
import type { NodeState, PartitionState, ReplicaState } from './types';

export function nodeView(n: NodeState, rates: Rates): Node {
  const { id, processId, storageInstance, live, capacity, zone, draining } = n;
  return { id, processId, storageInstance, live, downSince: live ? null : (n.downSince ?? null), capacity, zone, ...rates, draining };
}

interface Rates {
  publishRate: number;
  deliveryRate: number;
}

/** Bytes of the owner's log from offset `from` to the tail; from below the log start, the whole history. */
function bytesFrom(log: { tail: number; logStart: number }, messageBytes: number, from: number): number {
  return (log.tail - Math.max(Math.min(from, log.tail), log.logStart)) * messageBytes;
}

export function partitionRecord(sim: ClusterSim, p: PartitionState): Partition {
  const log = logNow(sim, p);
  const rate = serving(sim, p) ? p.publishRate : 0;
  return {
    id: p.id,
    kind: p.kind,
    owner: p.owner,
    followers: [...p.followers],
    learners: [...p.learners],
    leaving: p.leaving,
    epoch: p.epoch,
    generation: p.generation,
    replicationFactor: p.replicationFactor,
    durability: p.durability,
    writeRequirement: p.writeRequirement,
    history: p.history.map((h) => ({ ...h })),
    pendingRecovery: p.pendingRecovery ? { ...p.pendingRecovery } : null,
    admission: p.admission,
    boundary: p.boundary ? { ...p.boundary } : null,
    retainedCopies: p.retainedCopies.map(({ node, durableOffset, removedAt, retainedUntil, safeOffset }) => ({
      node,
      durableOffset,
      removedAt,
      retainedUntil,
      // add-learner restarts a retained copy from its safe offset.
      bytesToCatchUp: bytesFrom(log, p.messageBytes, safeOffset),
    })),
    historyBytes: bytesFrom(log, p.messageBytes, log.logStart),
    publishRate: rate,
    deliveryRate: rate,
  };
}

export function topology(sim: ClusterSim): Topology {
  const partitions: Partition[] = [];
  for (const p of sim.partitions.values()) partitions.push(partitionRecord(sim, p));
  return { contractVersion: CONTRACT_VERSION, ...nodesView(sim), partitions };
}

/** The records after `after` in id order, at most `limit`, and the id to read from next (null on the last page). */
export function topologyPage(sim: ClusterSim, after: string | undefined, limit: number): TopologyPage {
  const ids = (sim.idOrder ??= [...sim.partitions.keys()].sort(byCodeUnit));
  let from = 0;
  if (after !== undefined) {
    // The first id sorting after `after`: it need not exist (deleted since the page before).
    let hi = ids.length;
    while (from < hi) {
      const mid = (from + hi) >>> 1;
      if (ids[mid]! <= after) from = mid + 1;
      else hi = mid;
    }
  }
  const chosen = ids.slice(from, from + limit);
  const partitions = chosen.map((id) => partitionRecord(sim, sim.partitions.get(id)!));
  const next = from + limit < ids.length ? chosen.at(-1)! : null;
  return { contractVersion: CONTRACT_VERSION, ...nodesView(sim), partitions, next };
}

const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Every node, with the records that changed after `after` and the partitions deleted since. */
export function changesSince(sim: ClusterSim, after: number, removed: string[]): TopologyChanges {
  const partitions: Partition[] = [];
  for (const p of sim.partitions.values()) if ((p.changedAt ?? 0) > after) partitions.push(partitionRecord(sim, p));
  return { contractVersion: CONTRACT_VERSION, ...nodesView(sim), partitions, removed };
}

/**
 * A partition's traffic is its publish rate while the owner serves, nothing otherwise, delivered as published
 * (consumers keep up); a node's rates are the sums over the partitions it owns.
 */
export function nodesView(sim: ClusterSim): NodesView {
  const rates = ownedRates(sim);
  return {
    generation: sim.generation,
    now: sim.now,
    nodes: [...sim.nodes.values()].map((n) => {
      const rate = rates.get(n.id) ?? 0;
      return nodeView(n, { publishRate: rate, deliveryRate: rate });
    }),
  };
}

/**
 * Each node's rate summed over the partitions it owns and serves, once per generation: every change to an owner, a
 * rate, a recovery or a node's liveness raises it (the changes read relies on that too). Every read of the nodes (each
 * changes read, each move's check) summed 100,000 partitions at size: about 6 ms of the 12 an empty changes read took.
 */
const ratesAt = new WeakMap<ClusterSim, { generation: number; rates: Map<string, number> }>();

function ownedRates(sim: ClusterSim): Map<string, number> {
  const kept = ratesAt.get(sim);
  if (kept?.generation === sim.generation) return kept.rates;
  const rates = new Map<string, number>();
  for (const p of sim.partitions.values()) {
    if (serving(sim, p)) rates.set(p.owner, (rates.get(p.owner) ?? 0) + p.publishRate);
  }
  ratesAt.set(sim, { generation: sim.generation, rates });
  return rates;
}

export function replicaOrder(p: PartitionState): string[] {
  const out = [p.owner, ...p.followers];
  if (p.leaving) out.push(p.leaving);
  out.push(...p.learners);
  return out;
}

export function bytesRemaining(sim: ClusterSim, p: PartitionState, n: string, r: ReplicaState): number {
  if (n === p.owner) return 0;
  const ckpt = r.ckpt ? r.ckpt.totalBytes - r.ckpt.doneBytes : 0;
  const from = r.ckpt ? r.ckpt.offset : r.durable;
  const msgs = Math.max(0, p.tail - from);
  if (!r.ckpt && msgs <= sim.config.catchUpSlack) return 0;
  return Math.ceil(ckpt + msgs * p.messageBytes);
}

export function progress(sim: ClusterSim, id: string): Progress {
  const p = sim.partition(id);
  materialize(sim, p);
  const replicas: ReplicaProgress[] = replicaOrder(p).map((n) => {
    const r = p.replicas[n]!;
    const h = p.history.find((e) => e.node === n);
    const node = sim.nodes.get(n)!;
    const bytes = bytesRemaining(sim, p, n, r);
    const phase =
      r.ckpt || (n !== p.owner && r.durable < p.logStart)
        ? 'checkpoint'
        : p.tail - r.durable > sim.config.catchUpSlack
          ? 'tail'
          : 'caught_up';
    return {
      node: n,
      role: roleOf(p, n)!,
      durableOffset: r.durable,
      live: node.live,
      admitted: !!h && h.storageInstance === node.storageInstance,
      suspended: h?.suspended ?? false,
      bytesRemaining: bytes,
      phase,
      stalledSince: r.stalledSince,
      pausedForRecovery: r.pausedForRecovery,
    };
  });
  return {
    partition: p.id,
    generation: p.generation,
    epoch: p.epoch,
    now: sim.now,
    tail: p.tail,
    confirmedTail: p.confirmedTail,
    logStart: p.logStart,
    messageBytes: p.messageBytes,
    boundary: p.boundary?.offset ?? null,
    replicas,
  };
}

export function partitionView(sim: ClusterSim, id: string): PartitionView {
  // Progress first: it brings an anchored partition's offsets to now.
  const now = progress(sim, id);
  return { partition: partitionRecord(sim, sim.partition(id)), progress: now };
}

export function syncBudget(sim: ClusterSim): SyncBudget {
  const c = sim.config;
  const transfers: SyncBudget['transfers'] = [];
  for (const p of sim.active) {
    for (const n in p.replicas) {
      const r = p.replicas[n]!;
      if (!r.slot && !r.pausedForRecovery) continue;
      transfers.push({
        partition: p.id,
        node: n,
        kind: r.slot === 'recovery' ? 'recovery' : 'rebalance',
        bytesRemaining: bytesRemaining(sim, p, n, r),
        pausedForRecovery: r.pausedForRecovery,
      });
    }
  }
  return {
    perNodeLimit: c.perNodeLimit,
    clusterLimit: c.clusterLimit,
    clusterInUse: sim.clusterInUse,
    nodes: [...sim.nodes.keys()].map((n) => ({ node: n, inUse: sim.slotsInUse.get(n) ?? 0, limit: c.perNodeLimit })),
    transfers,
  };
}

/** A compact picture of one partition for breach reports. */
export function stateOf(sim: ClusterSim, p: PartitionState): Record<string, unknown> {
  const durables: Record<string, number> = {};
  for (const n in p.replicas) durables[n] = p.replicas[n]!.durable;
  return {
    owner: p.owner,
    followers: p.followers,
    learners: p.learners,
    leaving: p.leaving,
    epoch: p.epoch,
    generation: p.generation,
    writeRequirement: p.writeRequirement,
    history: p.history.map((h) => `${h.node}${h.suspended ? '(suspended)' : ''}`),
    eligible: p.history.filter((h) => sim.nodes.get(h.node)!.storageInstance === h.storageInstance).map((h) => h.node),
    durables,
    tail: p.tail,
    confirmedTail: p.confirmedTail,
    segments: p.segments,
    lostCopies: p.lostCopies,
    boundary: p.boundary,
    pendingRecovery: p.pendingRecovery,
  };
}

export function roleOf(p: PartitionState, n: string): ReplicaRole | null {
  if (p.owner === n) return 'owner';
  if (p.followers.includes(n)) return 'follower';
  if (p.leaving === n) return 'leaving';
  if (p.learners.includes(n)) return 'learner';
  return null;
}
