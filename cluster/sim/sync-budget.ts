/**
 * The sync budget: transfer slots per node and cluster-wide, recovery (rejoins) first, rebalancing transfers
 * paused for recovery and resumed once there is room.
 */
import type { ClusterSim } from './sim';
import type { PartitionState, ReplicaState } from './types';

function rejoinLimit(p: PartitionState): number {
  return Math.max(1, p.writeRequirement - 1);
}

/** Suspended replicas waiting for a recovery slot, in a stable order. */
function waitingRejoins(sim: ClusterSim, p: PartitionState): string[] {
  const out: string[] = [];
  for (const h of p.history) {
    const r = p.replicas[h.node];
    if (h.suspended && r && !r.slot && sim.nodes.get(h.node)!.live) out.push(h.node);
  }
  return out;
}

/** How many more rejoins the limit lets start now. */
function rejoinsAllowed(sim: ClusterSim, p: PartitionState): number {
  if (sim.mutants.has('rejoin.limit')) return Infinity;
  let rejoining = 0;
  for (const h of p.history) if (h.suspended && p.replicas[h.node]?.slot) rejoining++;
  return Math.max(0, rejoinLimit(p) - rejoining);
}

/** Recovery always comes first: a waiting rejoin takes a slot, pausing a rebalancing transfer if it must. */
export function grantRecoverySlots(sim: ClusterSim, p: PartitionState): void {
  const c = sim.config;
  let allowed = rejoinsAllowed(sim, p);
  for (const n of waitingRejoins(sim, p)) {
    if (allowed <= 0) return;
    const nodeFull = (sim.slotsInUse.get(n) ?? 0) >= c.perNodeLimit;
    if (nodeFull || sim.clusterInUse >= c.clusterLimit) {
      if (!sim.mutants.has('recovery.priority')) pauseRebalance(sim, nodeFull ? n : null);
      if ((sim.slotsInUse.get(n) ?? 0) >= c.perNodeLimit || sim.clusterInUse >= c.clusterLimit) continue;
    }
    p.replicas[n]!.slot = 'recovery';
    takeSlot(sim, n);
    allowed--;
  }
}

/**
 * Pauses one running rebalancing transfer (on `node`, or anywhere for the cluster-wide limit): it gives up
 * its slot and makes no progress until no recovery waits for it. Paused is not stalled: nothing is wrong.
 */
function pauseRebalance(sim: ClusterSim, node: string | null): void {
  sim.activeOrder ??= [...sim.active].sort((a, b) => a.ord - b.ord);
  for (const q of sim.activeOrder) {
    for (const n of q.learners) {
      const r = q.replicas[n]!;
      if (r.slot !== 'rebalance' || (node !== null && n !== node)) continue;
      releaseSlot(sim, n, r);
      r.pausedForRecovery = true;
      r.stalledSince = null;
      r.carry = 0;
      sim.dirtyPartitions.add(q);
      return;
    }
  }
}

/** A paused rebalancing transfer takes its slot back once its node is up and the budget has room with recovery served first. */
export function resumePaused(sim: ClusterSim, p: PartitionState): void {
  for (const n of p.learners) {
    const r = p.replicas[n]!;
    if (!r.pausedForRecovery || !sim.nodes.get(n)!.live || !rebalanceRoom(sim, n).room) continue;
    r.pausedForRecovery = false;
    r.slot = 'rebalance';
    takeSlot(sim, n);
  }
}

/** Whether a rebalancing transfer to n fits: recovery first, then the per-node and cluster limits. */
export function rebalanceRoom(sim: ClusterSim, n: string): { room: boolean; inUse: number; waiting: number } {
  const c = sim.config;
  const waiting = recoveryWaiting(sim);
  const inUse = sim.slotsInUse.get(n) ?? 0;
  const room = inUse + (waiting.byNode.get(n) ?? 0) < c.perNodeLimit && sim.clusterInUse + waiting.total < c.clusterLimit;
  return { room, inUse, waiting: waiting.total };
}

export function takeSlot(sim: ClusterSim, n: string): void {
  sim.slotsInUse.set(n, (sim.slotsInUse.get(n) ?? 0) + 1);
  sim.clusterInUse++;
}

export function releaseSlot(sim: ClusterSim, n: string, r: ReplicaState): void {
  if (!r.slot) return;
  r.slot = null;
  sim.slotsInUse.set(n, (sim.slotsInUse.get(n) ?? 1) - 1);
  sim.clusterInUse--;
}

/** Recovery demand not yet holding a slot (that the rejoin limit lets start): it comes before rebalancing. */
function recoveryWaiting(sim: ClusterSim): { total: number; byNode: Map<string, number> } {
  const byNode = new Map<string, number>();
  let total = 0;
  for (const p of sim.active) {
    if (p.pendingRecovery) continue;
    for (const n of waitingRejoins(sim, p).slice(0, rejoinsAllowed(sim, p))) {
      byNode.set(n, (byNode.get(n) ?? 0) + 1);
      total++;
    }
  }
  return { total, byNode };
}
