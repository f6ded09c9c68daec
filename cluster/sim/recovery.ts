/**
 * Recovery: a failed owner opens a pending recovery; activation seals E - W + 1 of the eligible set, continues
 * from the sealed replica that holds most and suspends the failed owner.
 */
import { checkActivation, checkPartition } from './invariants';
import type { ClusterSim } from './sim';
import { releaseSlot } from './sync-budget';
import type { PartitionState } from './types';

export function openRecovery(sim: ClusterSim, p: PartitionState, reason: string): void {
  if (p.pendingRecovery) return;
  p.pendingRecovery = { epoch: p.epoch, openedAt: sim.now, reason, failedOwner: p.owner };
  sim.bump(p);
  sim.emit({ type: 'recovery_opened', partition: p.id, epoch: p.epoch, failedOwner: p.owner });
}

function eligible(sim: ClusterSim, p: PartitionState, node: string): boolean {
  const h = p.history.find((e) => e.node === node);
  const bound = sim.holds('recovery.eligible-storage', sim.nodes.get(node)!.storageInstance === h?.storageInstance);
  return !!h && bound && node in p.replicas;
}

/**
 * Seals adversarially: of the surviving eligible replicas it takes the E - W + 1 least up to date, so the
 * pigeonhole argument is all that keeps confirmed messages; the source is the sealed one that holds most.
 */
export function tryActivate(sim: ClusterSim, p: PartitionState): void {
  const rec = p.pendingRecovery!;
  const w = p.writeRequirement;
  const need = Math.max(1, p.history.length - w + 1);
  const survivors = p.history
    .filter((h) => sim.nodes.get(h.node)!.live && eligible(sim, p, h.node))
    .map((h) => h.node);
  if (survivors.length === 0 || !sim.holds('recovery.seal-quorum', survivors.length >= need)) return;
  const dur = (n: string) => p.replicas[n]!.durable;
  const sealed = [...survivors].sort((a, b) => dur(a) - dur(b) || cmp(a, b)).slice(0, need);
  const most = sealed.reduce((best, n) => (dur(n) > dur(best) ? n : best), sealed[0]!);
  // sealed is sorted least up to date first: the mutant continues from the one that holds least.
  const source = sim.mutants.has('recovery.source-holds-most') ? sealed[0]! : most;
  const liveFollowers = p.followers.filter((f) => survivors.includes(f));
  const counted = liveFollowers.filter((f) => !p.history.find((h) => h.node === f)!.suspended);
  const byDurable = (xs: string[]) => [...xs].sort((a, b) => dur(b) - dur(a) || cmp(a, b))[0];
  let newOwner: string | undefined = counted.includes(source) ? source : byDurable(counted);
  newOwner ??= liveFollowers.includes(source) ? source : byDurable(liveFollowers);
  if (newOwner === undefined && survivors.includes(p.owner)) newOwner = p.owner;
  if (newOwner === undefined) return;

  const newTail = dur(source);
  const failed = p.owner;
  checkActivation(sim, p, newOwner, newTail, sim.sink);
  for (const n in p.replicas) {
    const r = p.replicas[n]!;
    if (r.durable > newTail) r.durable = newTail;
    if (r.ckpt && r.ckpt.offset > newTail) r.ckpt = null;
  }
  const ownerRep = p.replicas[newOwner]!;
  ownerRep.durable = newTail;
  ownerRep.ckpt = null;
  ownerRep.stalledSince = null;
  releaseSlot(sim, newOwner, ownerRep);
  if (newOwner !== failed) {
    p.followers = p.followers.map((f) => (f === newOwner ? failed : f));
    p.owner = newOwner;
  }
  const oi = p.history.findIndex((h) => h.node === newOwner);
  p.history[oi] = sim.bind(newOwner);
  p.confirmedTail = Math.min(p.confirmedTail, newTail);
  p.segments = p.segments.map((s) => ({ upTo: Math.min(s.upTo, newTail), w: s.w }));
  p.tail = newTail;
  p.prevTail = newTail;
  p.logStart = Math.min(p.logStart, newTail);
  p.epoch = rec.epoch + 1;
  p.pendingRecovery = null;
  const wasClosed = p.admission === 'closed';
  p.admission = 'open';
  p.finalBoundary = null;
  sim.bump(p);
  sim.emit({ type: 'recovery_activated', partition: p.id, epoch: p.epoch, owner: newOwner, generation: p.generation });
  if (wasClosed) sim.emit({ type: 'admission_reopened', partition: p.id });
  if (failed !== newOwner && sim.nodes.get(failed)!.live) suspend(sim, p, failed);
  checkPartition(sim, p, sim.sink, 'recovery activation');
}

export function suspend(sim: ClusterSim, p: PartitionState, n: string): void {
  const h = p.history.find((e) => e.node === n);
  if (!h || h.suspended) return;
  h.suspended = true;
  sim.bump(p);
  sim.emit({ type: 'suspended', partition: p.id, node: n, generation: p.generation });
}
function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
