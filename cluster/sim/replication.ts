/**
 * Replication and catch-up: stepping a partition every tick, followers following the owner, learners and
 * rejoining replicas catching up through the sync budget until admitted, the confirmed tail and progress events.
 */
import { checkPartition } from './invariants';
import type { ClusterSim } from './sim';
import { tryAnchor } from './anchor';
import { grantRecoverySlots, resumePaused, releaseSlot } from './sync-budget';
import { tryActivate } from './recovery';
import { replicaOrder, bytesRemaining } from './views';
import type { PartitionState, ReplicaState } from './types';

export function tick(sim: ClusterSim, dt: number): void {
  expireRetained(sim);
  sim.followBudget.clear();
  sim.activeOrder ??= [...sim.active].sort((a, b) => a.ord - b.ord);
  for (const p of sim.activeOrder) if (sim.active.has(p)) step(sim, p, dt);
}

function expireRetained(sim: ClusterSim): void {
  let i = 0;
  while (i < sim.retainedQueue.length && sim.retainedQueue[i]!.until <= sim.now) {
    const p = sim.partitions.get(sim.retainedQueue[i]!.partition);
    if (p) {
      const keep = p.retainedCopies.filter((c) => c.retainedUntil > sim.now);
      if (keep.length !== p.retainedCopies.length) {
        p.retainedCopies = keep;
        sim.touch(p);
      }
    }
    i++;
  }
  if (i > 0) sim.retainedQueue = sim.retainedQueue.slice(i);
}

export function serving(sim: ClusterSim, p: PartitionState): boolean {
  return p.pendingRecovery === null && sim.nodes.get(p.owner)!.live;
}

function step(sim: ClusterSim, p: PartitionState, dt: number): void {
  const c = sim.config;
  sim.dirtyPartitions.add(p);
  if (p.pendingRecovery) {
    if (sim.now >= p.pendingRecovery.openedAt + c.recoveryDelayMs) tryActivate(sim, p);
  }
  const serves = serving(sim, p);
  const before = p.tail;
  const x = p.frac + (p.publishRate * dt) / 1000;
  const k = Math.floor(x);
  p.frac = x - k;
  if (serves && p.admission === 'open') {
    p.tail += p.waiting + k;
    p.waiting = 0;
  } else {
    p.waiting += k;
  }
  const ownerRep = p.replicas[p.owner]!;
  if (serves) ownerRep.durable = p.tail;
  p.prevTail = before;

  if (serves) {
    grantRecoverySlots(sim, p);
    resumePaused(sim, p);
    const inSet = (n: string) => n !== p.owner;
    for (const n in p.replicas) if (inSet(n)) replicate(sim, p, n, p.replicas[n]!, before, dt);
  }
  // The owner keeps its log from the lowest replica still reading it, so followers never fall off.
  let pin = p.tail - c.retainMessages;
  for (const n in p.replicas) {
    const r = p.replicas[n]!;
    if (n === p.owner || r.ckpt || !sim.nodes.get(n)!.live) continue;
    if (isTransfer(p, n, r) && !r.slot) continue;
    if (r.durable < pin) pin = r.durable;
  }
  if (pin > p.logStart) p.logStart = pin;

  if (serves) updateConfirmed(sim, p);
  progressEvent(sim, p);
  checkPartition(sim, p, sim.sink, 'step');
  tryAnchor(sim, p);
}

/** True for a replica catching up through the sync budget: an unadmitted learner or a suspended replica. */
function isTransfer(p: PartitionState, node: string, r: ReplicaState): boolean {
  if (r.slot) return true;
  const h = p.history.find((e) => e.node === node);
  if (!h) return p.learners.includes(node);
  return h.suspended;
}

function replicate(sim: ClusterSim, p: PartitionState, n: string, r: ReplicaState, target: number, dt: number): void {
  const c = sim.config;
  const node = sim.nodes.get(n)!;
  const transfer = isTransfer(p, n, r);
  const needs = r.ckpt !== null || r.durable < target;
  if (transfer && !r.slot) return;
  if (!node.live || p.stalled.includes(n)) {
    if (needs && r.stalledSince === null) r.stalledSince = sim.now;
    return;
  }
  r.stalledSince = null;
  if (!needs) {
    if (transfer && sim.holds('admit.caught-up', caughtUp(sim, p, r))) admit(sim, p, n, r);
    return;
  }
  if (transfer) {
    let budget = (c.transferBytesPerSec * dt) / 1000 / Math.max(1, sim.slotsInUse.get(n) ?? 1) + r.carry;
    if (!r.ckpt && r.durable < p.logStart) {
      const msgs = Math.min(p.logStart - r.durable, c.retainMessages);
      r.ckpt = { offset: p.logStart, totalBytes: msgs * p.messageBytes, doneBytes: 0 };
    }
    if (r.ckpt) {
      const use = Math.min(budget, r.ckpt.totalBytes - r.ckpt.doneBytes);
      r.ckpt.doneBytes += use;
      budget -= use;
      if (r.ckpt.doneBytes >= r.ckpt.totalBytes) {
        r.durable = Math.max(r.durable, r.ckpt.offset);
        r.ckpt = null;
      }
    }
    if (!r.ckpt) {
      const msgs = Math.min(Math.floor(budget / p.messageBytes), Math.max(0, target - r.durable));
      r.durable += msgs;
      budget -= msgs * p.messageBytes;
    }
    r.carry = r.durable >= target ? 0 : Math.min(budget, p.messageBytes);
    if (sim.holds('admit.caught-up', caughtUp(sim, p, r))) admit(sim, p, n, r);
    return;
  }
  let budget = sim.followBudget.get(n);
  if (budget === undefined) budget = (c.followMessagesPerSec * dt) / 1000;
  const take = Math.min(Math.floor(budget), target - r.durable);
  r.durable += take;
  sim.followBudget.set(n, budget - take);
}

/**
 * Caught up: close to the tail and holding every confirmed message the followers were sent. A replica that
 * lost its disk is ineligible until re-admitted (its copies count as lost, within the fault budget); admitted
 * short of the confirmed tail it would be an eligible replica missing confirmed messages, which a seal of
 * E - W + 1 may pick alone (W = E seals one).
 */
function caughtUp(sim: ClusterSim, p: PartitionState, r: ReplicaState): boolean {
  const close = !r.ckpt && p.tail - r.durable <= sim.config.catchUpSlack;
  return close && r.durable >= Math.min(p.confirmedTail, p.prevTail);
}

/** A caught-up learner or rejoining replica enters (or returns to) the accepted history. */
function admit(sim: ClusterSim, p: PartitionState, n: string, r: ReplicaState): void {
  if (!sim.holds('admit.no-pending-recovery', p.pendingRecovery === null)) return;
  // While admission is closed for a handoff, W, the counted copies and the eligible set stay the same.
  if (!sim.holds('admit.admission-open', p.admission === 'open')) return;
  const entry = sim.bind(n);
  const i = p.history.findIndex((e) => e.node === n);
  if (i >= 0) p.history[i] = entry;
  else p.history.push(entry);
  releaseSlot(sim, n, r);
  r.carry = 0;
  sim.bump(p);
  sim.emit({ type: 'admitted', partition: p.id, node: n, generation: p.generation });
}

/** The counted copies: the owner plus live, unsuspended followers. Learners and leaving never count. */
function countedDurables(sim: ClusterSim, p: PartitionState): number[] {
  const out = [p.replicas[p.owner]!.durable];
  for (const f of p.followers) {
    if (!sim.nodes.get(f)!.live) continue;
    const h = p.history.find((e) => e.node === f);
    if (!h || h.suspended) continue;
    out.push(p.replicas[f]!.durable);
  }
  return out;
}

function updateConfirmed(sim: ClusterSim, p: PartitionState): void {
  const d = countedDurables(sim, p);
  const w = p.writeRequirement;
  if (d.length < w) return;
  d.sort((a, b) => b - a);
  const c = d[w - 1]!;
  if (c > p.confirmedTail) p.confirmedTail = c;
}

function moveRelevant(p: PartitionState): boolean {
  return (
    p.learners.length > 0 ||
    p.leaving !== null ||
    p.admission === 'closed' ||
    p.history.some((h) => h.suspended)
  );
}

function progressEvent(sim: ClusterSim, p: PartitionState): void {
  if (!moveRelevant(p)) return;
  const replicas = replicaOrder(p).map((n) => {
    const r = p.replicas[n]!;
    return {
      node: n,
      durableOffset: r.durable,
      bytesRemaining: bytesRemaining(sim, p, n, r),
      stalled: r.stalledSince !== null,
      pausedForRecovery: r.pausedForRecovery,
    };
  });
  const sig = `${p.generation}|${p.confirmedTail}|${p.boundary?.offset ?? ''}|${replicas
    .map((r) => `${r.node}:${r.durableOffset}:${r.bytesRemaining}:${r.stalled ? 1 : 0}:${r.pausedForRecovery ? 1 : 0}`)
    .join(',')}`;
  if (sig === p.lastProgressSig) return;
  p.lastProgressSig = sig;
  sim.emit({
    type: 'progress',
    partition: p.id,
    generation: p.generation,
    confirmedTail: p.confirmedTail,
    boundary: p.boundary?.offset ?? null,
    replicas,
  });
}
