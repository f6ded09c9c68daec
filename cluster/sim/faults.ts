/**
 * Faults and test controls: crash, restart, lose-disk, fail-owner, delayed or dropped events, injected
 * refusals, stalls, and creating or deleting nodes and partitions.
 */
import type { Fault, Node, PartitionView } from '../contract';
import { checkPartition } from './invariants';
import { NodeExistsError } from './errors';
import type { ClusterSim } from './sim';
import { wake } from './anchor';
import { serving } from './replication';
import { releaseSlot } from './sync-budget';
import { openRecovery, suspend } from './recovery';
import { nodeView, partitionView, roleOf } from './views';
import type { Injection, NodeState, PartitionSettings, PartitionState } from './types';

export function fault(sim: ClusterSim, f: Fault): string {
  switch (f.fault) {
    case 'crash-node': {
      const n = sim.node(f.node);
      if (!n.live) return `${n.id} is already down`;
      crash(sim, n);
      return `${n.id} crashed`;
    }
    case 'restart-node': {
      const n = sim.node(f.node);
      if (n.live) crash(sim, n);
      restart(sim, n);
      return `${n.id} restarted as ${n.processId}`;
    }
    case 'lose-disk': {
      const n = sim.node(f.node);
      loseDisk(sim, n);
      return `${n.id} lost its disk; new storage instance ${n.storageInstance}`;
    }
    case 'fail-owner': {
      const p = sim.partition(f.partition);
      if (p.pendingRecovery) return `${p.id} already has a pending recovery`;
      wake(sim, p);
      openRecovery(sim, p, 'owner failed (injected)');
      return `${p.id}: owner ${p.owner} failed, recovery opened at epoch ${p.epoch}`;
    }
    case 'delay-events':
      // Never shortened: the feed stays in order, so later events wait behind delayed ones.
      sim.delayUntil = Math.max(sim.delayUntil, sim.now + f.ms);
      return `events emitted until ${sim.delayUntil} become readable at ${sim.delayUntil}`;
    case 'drop-events':
      sim.dropCount = f.count;
      return `the next ${f.count} events are dropped`;
    case 'refuse-next-write': {
      if (f.partition !== undefined) sim.partition(f.partition);
      const inj: Injection = {};
      if (f.partition !== undefined) inj.partition = f.partition;
      if (f.write !== undefined) inj.write = f.write;
      sim.injections.push(inj);
      return `the next ${f.write ?? 'guarded write'} on ${f.partition ?? 'any partition'} is refused`;
    }
    case 'set-draining':
      setDraining(sim, f.node, f.draining, null);
      return `${f.node} ${f.draining ? 'is draining' : 'is no longer draining'}`;
    case 'stall-transfer': {
      const p = sim.partition(f.partition);
      sim.node(f.node);
      wake(sim, p);
      const has = p.stalled.includes(f.node);
      if (f.stalled && !has) p.stalled.push(f.node);
      if (!f.stalled && has) p.stalled = p.stalled.filter((n) => n !== f.node);
      sim.dirtyPartitions.add(p);
      return `${p.id} replication to ${f.node} ${f.stalled ? 'stalled' : 'resumed'}`;
    }
  }
}

function partitionsOn(sim: ClusterSim, node: string): PartitionState[] {
  const out: PartitionState[] = [];
  for (const p of sim.partitions.values()) {
    if (node in p.replicas || p.retainedCopies.some((c) => c.node === node)) out.push(p);
  }
  return out;
}

/** Wakes the node's partitions at now, before the node changes: their offsets so far depend on it. */
function wakeOn(sim: ClusterSim, node: string): PartitionState[] {
  const ps = partitionsOn(sim, node);
  for (const p of ps) wake(sim, p);
  return ps;
}

function crash(sim: ClusterSim, n: NodeState): void {
  const ps = wakeOn(sim, n.id);
  n.live = false;
  n.downSince = sim.now;
  sim.dirtyNodes.add(n);
  sim.generation++;
  sim.emit({ type: 'node_down', node: n.id });
  for (const p of ps) {
    const r = p.replicas[n.id];
    // A transfer to a down node cannot progress: its slot goes back to the sync budget, or a node lost for
    // good would shrink it for good. Once the node is up, it takes one through the normal grant path.
    if (r?.slot) {
      releaseSlot(sim, n.id, r);
      r.carry = 0;
      r.stalledSince ??= sim.now;
    }
    if (p.owner === n.id) openRecovery(sim, p, `owner node ${n.id} crashed`);
  }
}

function restart(sim: ClusterSim, n: NodeState): void {
  const ps = wakeOn(sim, n.id);
  n.live = true;
  n.downSince = null;
  n.processId = `${n.id}-p${sim.prng.hex()}`;
  sim.dirtyNodes.add(n);
  sim.generation++;
  sim.emit({ type: 'node_up', node: n.id, processId: n.processId });
  for (const p of ps) {
    // A restarted replica's process no longer matches the history: it rejoins through learner admission.
    if (n.id in p.replicas && p.owner !== n.id) suspend(sim, p, n.id);
    // A learner that lost its slot when the node went down waits behind the node's rejoins, which come first.
    const r = p.replicas[n.id];
    if (r && !r.slot && p.learners.includes(n.id) && !p.history.some((h) => h.node === n.id)) {
      r.pausedForRecovery = true;
      r.stalledSince = null;
    }
  }
}

function loseDisk(sim: ClusterSim, n: NodeState): void {
  const ps = wakeOn(sim, n.id);
  n.storageInstance = `${n.id}-s${sim.prng.hex()}`;
  sim.dirtyNodes.add(n);
  sim.generation++;
  sim.emit({ type: 'disk_lost', node: n.id });
  for (const p of ps) {
    if (p.retainedCopies.some((c) => c.node === n.id)) {
      p.retainedCopies = p.retainedCopies.filter((c) => c.node !== n.id);
      sim.touch(p);
    }
    const r = p.replicas[n.id];
    if (!r) continue;
    const h = p.history.find((e) => e.node === n.id);
    if (h && r.durable > 0) p.lostCopies.push({ node: n.id, durableAtLoss: r.durable, at: sim.now });
    r.durable = 0;
    r.ckpt = null;
    r.carry = 0;
    if (p.owner === n.id) openRecovery(sim, p, `owner node ${n.id} lost its disk`);
    else suspend(sim, p, n.id);
    checkPartition(sim, p, sim.sink, `disk loss on ${n.id}`);
  }
}

export function joinNode(sim: ClusterSim, id: string, capacity = 1, zone = 'z1'): Node {
  if (sim.nodes.has(id)) throw new NodeExistsError(id);
  const n = sim.addNode(id, capacity, zone);
  sim.generation++;
  sim.emit({ type: 'node_joined', node: id });
  return nodeView(n, { publishRate: 0, deliveryRate: 0 });
}

/** Marks a node as draining (add-learner then refuses it with node_draining) or clears the mark; the same flag again changes nothing. */
export function setDraining(sim: ClusterSim, id: string, draining: boolean, reason: string | null): Node {
  const n = sim.node(id);
  if (n.draining !== draining) {
    n.draining = draining;
    sim.dirtyNodes.add(n);
    sim.generation++;
    sim.emit({ type: 'node_draining', node: id, draining, reason });
  }
  return sim.nodesView().nodes.find((x) => x.id === id)!;
}

export function publish(sim: ClusterSim, partitionId: string, count: number): { firstOffset: number; nextOffset: number } {
  const p = sim.partition(partitionId);
  wake(sim, p);
  sim.dirtyPartitions.add(p);
  if (serving(sim, p) && p.admission === 'open') {
    // Messages that waited while admission was closed keep the offsets they were given: they go first.
    p.tail += p.waiting;
    p.waiting = 0;
    const first = p.tail;
    p.tail += count;
    p.replicas[p.owner]!.durable = p.tail;
    return { firstOffset: first, nextOffset: p.tail };
  }
  const first = p.tail + p.waiting;
  p.waiting += count;
  return { firstOffset: first, nextOffset: first + count };
}

export function setRate(sim: ClusterSim, partitionId: string, publishRate: number): PartitionView {
  const p = sim.partition(partitionId);
  wake(sim, p);
  p.publishRate = publishRate;
  // Set, not measured: listed as a change, so a reader sees the new rate at once.
  sim.touch(p);
  return partitionView(sim, partitionId);
}

/** Test control: a new partition on live nodes, owner first; the caller checked the id is new. */
export function createPartition(sim: ClusterSim, id: string, kind: 'queue' | 'stream', replicas: string[], settings: PartitionSettings): PartitionView {
  for (const n of replicas) {
    if (!sim.node(n).live) throw new Error(`cannot place ${id} on ${n}: it is down`);
  }
  sim.addPartition(id, kind, replicas, replicas.length, settings);
  sim.touch(sim.partition(id));
  return partitionView(sim, id);
}

/**
 * Test control: forgets a partition entirely (its transfer slots, retained copies and pending injected
 * refusals with it), so a test leaves the topology as it found it. Events already emitted stay in the feed.
 */
export function deletePartition(sim: ClusterSim, id: string): void {
  const p = sim.partition(id);
  for (const [n, r] of Object.entries(p.replicas)) releaseSlot(sim, n, r);
  sim.partitions.delete(id);
  sim.idOrder = null;
  sim.active.delete(p);
  sim.activeOrder = null;
  sim.dirtyPartitions.delete(p);
  sim.retainedQueue = sim.retainedQueue.filter((q) => q.partition !== id);
  sim.injections = sim.injections.filter((i) => i.partition !== id);
  sim.forget(id);
}

/** Why the node cannot be deleted: every partition that still holds it, and how. Empty: it can be. */
export function nodeInUse(sim: ClusterSim, id: string): string[] {
  sim.node(id);
  const uses: string[] = [];
  for (const p of sim.partitions.values()) {
    const role = roleOf(p, id);
    if (role !== null) uses.push(`${role} of ${p.id}`);
    else if (id in p.replicas || p.history.some((h) => h.node === id)) uses.push(`replica of ${p.id}`);
    if (p.retainedCopies.some((c) => c.node === id)) uses.push(`retained copy of ${p.id}`);
    if (p.stalled.includes(id)) uses.push(`stalled transfer of ${p.id}`);
  }
  return uses;
}

/** Test control: removes a node nothing holds (see nodeInUse; the caller checked). */
export function deleteNode(sim: ClusterSim, id: string): void {
  const uses = nodeInUse(sim, id);
  if (uses.length > 0) throw new Error(`node ${id} is still in use: ${uses.join(', ')}`);
  const n = sim.node(id);
  sim.nodes.delete(id);
  sim.dirtyNodes.delete(n);
  sim.slotsInUse.delete(id);
  sim.generation++;
}
