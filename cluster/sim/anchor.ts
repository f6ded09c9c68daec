/**
 * Steady-state anchoring: a quiet partition is not stepped; its offsets follow from an anchor (time, tail,
 * follower base) until something wakes it.
 */
import type { ClusterSim } from './sim';
import type { PartitionState } from './types';

function tailAt(a: NonNullable<PartitionState['anchor']>, rate: number, t: number): { tail: number; frac: number } {
  const x = a.frac + (rate * (t - a.at)) / 1000;
  const k = Math.floor(x);
  return { tail: a.tail + k, frac: x - k };
}

/** An anchored partition's owner tail, follower tail (one step behind) and log start now. */
function anchoredOffsets(sim: ClusterSim, p: PartitionState, a: NonNullable<PartitionState['anchor']>) {
  const { tail } = tailAt(a, p.publishRate, sim.now);
  const t2 = sim.now - sim.config.tickMs;
  const follower = t2 < a.at ? a.followerBase : tailAt(a, p.publishRate, t2).tail;
  return { tail, follower, logStart: Math.max(a.logStart, Math.min(tail - sim.config.retainMessages, follower)) };
}

/** The owner's log now, anchored or not, without touching the partition (a cheap read for the topology). */
export function logNow(sim: ClusterSim, p: PartitionState): { tail: number; logStart: number } {
  return p.anchor ? anchoredOffsets(sim, p, p.anchor) : { tail: p.tail, logStart: p.logStart };
}

/** Brings an anchored partition's offsets to now (no state change: the anchor still defines them). */
export function materialize(sim: ClusterSim, p: PartitionState): void {
  const a = p.anchor;
  if (!a) return;
  const { tail, follower, logStart } = anchoredOffsets(sim, p, a);
  p.tail = tail;
  p.prevTail = follower;
  p.replicas[p.owner]!.durable = tail;
  // Followers on down nodes stay frozen; the live ones follow the owner one step behind.
  let live = 1;
  for (const f of p.followers) {
    if (!sim.nodes.get(f)!.live) continue;
    p.replicas[f]!.durable = follower;
    live++;
  }
  if (live >= p.writeRequirement) {
    p.confirmedTail = Math.max(a.confirmed, p.writeRequirement <= 1 ? tail : follower);
  }
  p.logStart = logStart;
}

export function activate(sim: ClusterSim, p: PartitionState): void {
  if (sim.active.has(p)) return;
  sim.active.add(p);
  sim.activeOrder = null;
}

/** Makes the partition stepped from now on. */
export function wake(sim: ClusterSim, p: PartitionState): void {
  const a = p.anchor;
  if (a) {
    materialize(sim, p);
    p.frac = tailAt(a, p.publishRate, sim.now).frac;
    p.anchor = null;
    sim.dirtyPartitions.add(p);
  }
  activate(sim, p);
}

function isQuiet(sim: ClusterSim, p: PartitionState): boolean {
  const owner = sim.nodes.get(p.owner)!;
  if (!owner.live || p.pendingRecovery || p.admission !== 'open' || p.waiting > 0) return false;
  if (p.learners.length > 0 || p.leaving !== null || p.stalled.length > 0) return false;
  if (p.replicas[p.owner]!.durable !== p.tail) return false;
  let live = 1;
  for (const f of p.followers) {
    const r = p.replicas[f]!;
    if (r.slot || r.ckpt) return false;
    if (!sim.nodes.get(f)!.live) continue;
    if (r.durable !== p.prevTail) return false;
    live++;
  }
  for (const h of p.history) {
    if (h.suspended || sim.nodes.get(h.node)!.storageInstance !== h.storageInstance) return false;
  }
  if (p.history.length !== 1 + p.followers.length) return false;
  // With fewer than W live counted copies confirms stall, which the anchor keeps as a frozen value.
  if (live < p.writeRequirement) return true;
  const expectConfirmed = p.writeRequirement <= 1 ? p.tail : p.prevTail;
  return p.confirmedTail === expectConfirmed;
}

export function tryAnchor(sim: ClusterSim, p: PartitionState): boolean {
  if (!isQuiet(sim, p)) return false;
  p.anchor = {
    at: sim.now,
    tail: p.tail,
    frac: p.frac,
    followerBase: p.prevTail,
    logStart: p.logStart,
    confirmed: p.confirmedTail,
  };
  sim.active.delete(p);
  sim.activeOrder = null;
  sim.dirtyPartitions.add(p);
  return true;
}
