/**
 * The reference cluster's simulation core: nodes, queue and stream partitions, replication, learners,
 * guarded writes, recovery and the safety checker. No I/O: the store persists what takeChanges() returns and
 * the server maps HTTP onto these methods. Time is simulated milliseconds and only moves in advance().
 */
import {
  CONTRACT_VERSION,
  writeRequirement,
  type Breach,
  type ClusterEvent,
  type Fault,
  type GuardedWriteName,
  type GuardedWriteRequest,
  type Node,
  type NodesView,
  type Partition,
  type PartitionView,
  type Progress,
  type RefusalCode,
  type ReplicaProgress,
  type ReplicaRole,
  type SyncBudget,
  type Topology,
  type WriteReply,
} from '../contract';
import { checkActivation, checkPartition, type BreachSink } from './invariants';
import type { MutantName } from './mutants';
import { Prng } from './prng';
import {
  defaultConfig,
  type Injection,
  type NodeState,
  type PartitionState,
  type ReplicaState,
  type SimChanges,
  type SimConfig,
  type SimMeta,
  type SimSnapshot,
  type StoredEvent,
} from './types';

export class UnknownPartitionError extends Error {
  constructor(readonly partition: string) {
    super(`unknown partition ${partition}`);
  }
}
export class UnknownNodeError extends Error {
  constructor(readonly node: string) {
    super(`unknown node ${node}`);
  }
}
export class NodeExistsError extends Error {
  constructor(readonly node: string) {
    super(`node ${node} already exists`);
  }
}

export interface InitOptions {
  nodes: number;
  partitions: number;
  streams: number;
  config?: Partial<SimConfig>;
}

type EventBody = ClusterEvent extends infer E ? (E extends ClusterEvent ? Omit<E, 'seq' | 'at'> : never) : never;

const MAX_BREACHES = 10_000;

class Refused {
  constructor(
    readonly code: RefusalCode,
    readonly message: string,
    readonly saw: Record<string, unknown>,
  ) {}
}

export class ClusterSim {
  readonly config: SimConfig;
  now: number;
  generation: number;
  checks: number;
  private lastSeq: number;
  private readonly prng: Prng;
  private injections: Injection[];
  private delayUntil: number;
  private dropCount: number;

  /** Test-only: the rules (cluster/sim/mutants.ts) whose check is skipped. In memory only, never persisted. */
  readonly mutants = new Set<MutantName>();
  readonly nodes = new Map<string, NodeState>();
  readonly partitions = new Map<string, PartitionState>();
  /** Creation order of the next partition: never reused after a delete, so stepping order survives restarts. */
  private nextOrd = 0;
  private readonly breaches: Breach[] = [];
  private readonly breachKeys = new Set<string>();

  /** Partitions that are stepped every tick (not anchored). */
  private readonly active = new Set<PartitionState>();
  /** The active set in creation order, rebuilt only when the set changed. */
  private activeOrder: PartitionState[] | null = null;
  private readonly slotsInUse = new Map<string, number>();
  private clusterInUse = 0;
  /** Retained copies in expiry order (retainedUntil only ever grows with now). */
  private retainedQueue: { until: number; partition: string }[] = [];
  private readonly followBudget = new Map<string, number>();

  private dirtyNodes = new Set<NodeState>();
  private dirtyPartitions = new Set<PartitionState>();
  private outbox: StoredEvent[] = [];
  private newBreaches: Breach[] = [];
  private readonly sink: BreachSink;

  private constructor(meta: SimMeta) {
    this.config = meta.config;
    this.now = meta.now;
    this.generation = meta.generation;
    this.checks = meta.checks;
    this.lastSeq = meta.lastSeq;
    this.prng = new Prng(meta.prng);
    this.injections = meta.injections;
    this.delayUntil = meta.delayUntil;
    this.dropCount = meta.dropCount;
    this.sink = {
      check: () => {
        this.checks++;
      },
      breach: (b, key) => this.recordBreach(b, key),
    };
  }

  static create(options: InitOptions): ClusterSim {
    const config: SimConfig = { ...defaultConfig, ...options.config };
    const sim = new ClusterSim({
      config,
      now: 0,
      lastSeq: 0,
      generation: 1,
      prng: config.seed,
      checks: 0,
      injections: [],
      delayUntil: 0,
      dropCount: 0,
    });
    for (let i = 1; i <= options.nodes; i++) sim.addNode(`n${i}`, 1, `z${((i - 1) % 3) + 1}`);
    const nodeIds = [...sim.nodes.keys()];
    const rf = Math.min(config.replicationFactor, Math.max(1, nodeIds.length));
    const total = options.partitions + options.streams;
    for (let i = 0; i < total; i++) {
      const kind = i < options.partitions ? 'queue' : 'stream';
      const id = kind === 'queue' ? `q-${i}` : `s-${i - options.partitions}`;
      const placed = Array.from({ length: rf }, (_, k) => nodeIds[(i + k) % nodeIds.length]!);
      sim.addPartition(id, kind, placed, config.replicationFactor);
    }
    sim.dirtyNodes = new Set(sim.nodes.values());
    sim.dirtyPartitions = new Set(sim.partitions.values());
    return sim;
  }

  static fromSnapshot(snap: SimSnapshot): ClusterSim {
    const sim = new ClusterSim(snap.meta);
    for (const n of snap.nodes) sim.nodes.set(n.id, n);
    for (const p of snap.partitions) {
      sim.partitions.set(p.id, p);
      sim.nextOrd = Math.max(sim.nextOrd, p.ord + 1);
      if (!p.anchor) sim.active.add(p);
      for (const [node, r] of Object.entries(p.replicas)) if (r.slot) sim.takeSlot(node);
      for (const c of p.retainedCopies) sim.retainedQueue.push({ until: c.retainedUntil, partition: p.id });
    }
    sim.retainedQueue.sort((a, b) => a.until - b.until);
    for (const b of snap.breaches) {
      sim.breaches.push(b);
      sim.breachKeys.add(breachKey(b));
    }
    return sim;
  }

  snapshot(): SimSnapshot {
    return {
      meta: this.meta(),
      nodes: [...this.nodes.values()],
      partitions: [...this.partitions.values()],
      breaches: [...this.breaches],
    };
  }

  private meta(): SimMeta {
    return {
      config: this.config,
      now: this.now,
      lastSeq: this.lastSeq,
      generation: this.generation,
      prng: this.prng.state,
      checks: this.checks,
      injections: this.injections,
      delayUntil: this.delayUntil,
      dropCount: this.dropCount,
    };
  }

  /** Everything changed since the last call: one store transaction. */
  takeChanges(): SimChanges {
    const changes: SimChanges = {
      meta: this.meta(),
      nodes: [...this.dirtyNodes],
      partitions: [...this.dirtyPartitions],
      events: this.outbox,
      breaches: this.newBreaches,
    };
    this.dirtyNodes.clear();
    this.dirtyPartitions.clear();
    this.outbox = [];
    this.newBreaches = [];
    return changes;
  }

  get seq(): number {
    return this.lastSeq;
  }

  // ------------------------------------------------------------------ setup

  private addNode(id: string, capacity: number, zone: string): NodeState {
    const node: NodeState = {
      id,
      processId: `${id}-p${this.prng.hex()}`,
      storageInstance: `${id}-s${this.prng.hex()}`,
      live: true,
      capacity,
      zone,
      draining: false,
    };
    this.nodes.set(id, node);
    this.dirtyNodes.add(node);
    return node;
  }

  private addPartition(id: string, kind: 'queue' | 'stream', placed: string[], rf: number, tail = this.config.initialMessages): void {
    const c = this.config;
    const durability = kind === 'stream' ? { mode: 'replica_durable' as const, n: rf } : c.durability;
    const replicas: Record<string, ReplicaState> = {};
    for (const n of placed) replicas[n] = newReplica(tail);
    const p: PartitionState = {
      id,
      ord: this.nextOrd++,
      kind,
      owner: placed[0]!,
      followers: placed.slice(1),
      learners: [],
      leaving: null,
      epoch: 1,
      generation: 1,
      replicationFactor: rf,
      durability,
      writeRequirement: writeRequirement(durability, rf),
      history: placed.map((n) => this.bind(n)),
      pendingRecovery: null,
      admission: 'open',
      boundary: null,
      retainedCopies: [],
      publishRate: c.publishRate,
      tail,
      frac: 0,
      prevTail: tail,
      waiting: 0,
      confirmedTail: tail,
      logStart: Math.max(0, tail - c.retainMessages),
      finalBoundary: null,
      replicas,
      segments: [],
      lostCopies: [],
      stalled: [],
      lastProgressSig: '',
      anchor: null,
    };
    this.partitions.set(id, p);
    if (!this.tryAnchor(p)) this.activate(p);
  }

  private bind(node: string): { node: string; processId: string; storageInstance: string; suspended: boolean } {
    const n = this.nodes.get(node)!;
    return { node, processId: n.processId, storageInstance: n.storageInstance, suspended: false };
  }

  // ------------------------------------------------------------------ events and breaches

  private emit(body: EventBody): void {
    const seq = ++this.lastSeq;
    if (this.dropCount > 0) {
      this.dropCount--;
      return;
    }
    const event = { seq, at: this.now, ...body } as ClusterEvent;
    this.outbox.push({ event, visibleAt: Math.max(this.now, this.delayUntil) });
  }

  private recordBreach(b: Omit<Breach, 'at'>, key: string): void {
    if (this.breachKeys.has(key) || this.breaches.length >= MAX_BREACHES) return;
    this.breachKeys.add(key);
    // The key rides in the state so that deduplication survives a restart.
    const breach: Breach = { at: this.now, ...b, state: { ...b.state, key } };
    this.breaches.push(breach);
    this.newBreaches.push(breach);
  }

  invariants(): { checks: number; breaches: Breach[] } {
    return { checks: this.checks, breaches: [...this.breaches] };
  }

  /** A rule holds when its condition does, or when a test removed it (mutants). */
  private holds(m: MutantName, cond: boolean): boolean {
    return cond || this.mutants.has(m);
  }

  private bump(p: PartitionState): void {
    p.generation++;
    this.generation++;
    this.dirtyPartitions.add(p);
  }

  // ------------------------------------------------------------------ steady-state anchoring

  private tailAt(a: NonNullable<PartitionState['anchor']>, rate: number, t: number): { tail: number; frac: number } {
    const x = a.frac + (rate * (t - a.at)) / 1000;
    const k = Math.floor(x);
    return { tail: a.tail + k, frac: x - k };
  }

  /** Brings an anchored partition's offsets to now (no state change: the anchor still defines them). */
  private materialize(p: PartitionState): void {
    const a = p.anchor;
    if (!a) return;
    const { tail } = this.tailAt(a, p.publishRate, this.now);
    const t2 = this.now - this.config.tickMs;
    const follower = t2 < a.at ? a.followerBase : this.tailAt(a, p.publishRate, t2).tail;
    p.tail = tail;
    p.prevTail = follower;
    p.replicas[p.owner]!.durable = tail;
    // Followers on down nodes stay frozen; the live ones follow the owner one step behind.
    let live = 1;
    for (const f of p.followers) {
      if (!this.nodes.get(f)!.live) continue;
      p.replicas[f]!.durable = follower;
      live++;
    }
    if (live >= p.writeRequirement) {
      p.confirmedTail = Math.max(a.confirmed, p.writeRequirement <= 1 ? tail : follower);
    }
    p.logStart = Math.max(a.logStart, Math.min(tail - this.config.retainMessages, follower));
  }

  private activate(p: PartitionState): void {
    if (this.active.has(p)) return;
    this.active.add(p);
    this.activeOrder = null;
  }

  /** Makes the partition stepped from now on. */
  private wake(p: PartitionState): void {
    const a = p.anchor;
    if (a) {
      this.materialize(p);
      p.frac = this.tailAt(a, p.publishRate, this.now).frac;
      p.anchor = null;
      this.dirtyPartitions.add(p);
    }
    this.activate(p);
  }

  private isQuiet(p: PartitionState): boolean {
    const owner = this.nodes.get(p.owner)!;
    if (!owner.live || p.pendingRecovery || p.admission !== 'open' || p.waiting > 0) return false;
    if (p.learners.length > 0 || p.leaving !== null || p.stalled.length > 0) return false;
    if (p.replicas[p.owner]!.durable !== p.tail) return false;
    let live = 1;
    for (const f of p.followers) {
      const r = p.replicas[f]!;
      if (r.slot || r.ckpt) return false;
      if (!this.nodes.get(f)!.live) continue;
      if (r.durable !== p.prevTail) return false;
      live++;
    }
    for (const h of p.history) {
      if (h.suspended || this.nodes.get(h.node)!.storageInstance !== h.storageInstance) return false;
    }
    if (p.history.length !== 1 + p.followers.length) return false;
    // With fewer than W live counted copies confirms stall, which the anchor keeps as a frozen value.
    if (live < p.writeRequirement) return true;
    const expectConfirmed = p.writeRequirement <= 1 ? p.tail : p.prevTail;
    return p.confirmedTail === expectConfirmed;
  }

  private tryAnchor(p: PartitionState): boolean {
    if (!this.isQuiet(p)) return false;
    p.anchor = {
      at: this.now,
      tail: p.tail,
      frac: p.frac,
      followerBase: p.prevTail,
      logStart: p.logStart,
      confirmed: p.confirmedTail,
    };
    this.active.delete(p);
    this.activeOrder = null;
    this.dirtyPartitions.add(p);
    return true;
  }

  // ------------------------------------------------------------------ time

  /** Steps the simulation by ms simulated milliseconds, in ticks of config.tickMs. */
  advance(ms: number): void {
    let left = ms;
    while (left > 0) {
      const dt = Math.min(this.config.tickMs, left);
      left -= dt;
      this.now += dt;
      this.tick(dt);
    }
  }

  private tick(dt: number): void {
    this.expireRetained();
    this.followBudget.clear();
    this.activeOrder ??= [...this.active].sort((a, b) => a.ord - b.ord);
    for (const p of this.activeOrder) if (this.active.has(p)) this.step(p, dt);
  }

  private expireRetained(): void {
    let i = 0;
    while (i < this.retainedQueue.length && this.retainedQueue[i]!.until <= this.now) {
      const p = this.partitions.get(this.retainedQueue[i]!.partition);
      if (p) {
        const keep = p.retainedCopies.filter((c) => c.retainedUntil > this.now);
        if (keep.length !== p.retainedCopies.length) {
          p.retainedCopies = keep;
          this.dirtyPartitions.add(p);
        }
      }
      i++;
    }
    if (i > 0) this.retainedQueue = this.retainedQueue.slice(i);
  }

  private serving(p: PartitionState): boolean {
    return p.pendingRecovery === null && this.nodes.get(p.owner)!.live;
  }

  private step(p: PartitionState, dt: number): void {
    const c = this.config;
    this.dirtyPartitions.add(p);
    if (p.pendingRecovery) {
      if (this.now >= p.pendingRecovery.openedAt + c.recoveryDelayMs) this.tryActivate(p);
    }
    const serving = this.serving(p);
    const before = p.tail;
    const x = p.frac + (p.publishRate * dt) / 1000;
    const k = Math.floor(x);
    p.frac = x - k;
    if (serving && p.admission === 'open') {
      p.tail += p.waiting + k;
      p.waiting = 0;
    } else {
      p.waiting += k;
    }
    const ownerRep = p.replicas[p.owner]!;
    if (serving) ownerRep.durable = p.tail;
    p.prevTail = before;

    if (serving) {
      this.grantRecoverySlots(p);
      this.resumePaused(p);
      const inSet = (n: string) => n !== p.owner;
      for (const n in p.replicas) if (inSet(n)) this.replicate(p, n, p.replicas[n]!, before, dt);
    }
    // The owner keeps its log from the lowest replica still reading it, so followers never fall off.
    let pin = p.tail - c.retainMessages;
    for (const n in p.replicas) {
      const r = p.replicas[n]!;
      if (n === p.owner || r.ckpt || !this.nodes.get(n)!.live) continue;
      if (this.isTransfer(p, n, r) && !r.slot) continue;
      if (r.durable < pin) pin = r.durable;
    }
    if (pin > p.logStart) p.logStart = pin;

    if (serving) this.updateConfirmed(p);
    this.progressEvent(p);
    checkPartition(this, p, this.sink, 'step');
    this.tryAnchor(p);
  }

  /** True for a replica catching up through the sync budget: an unadmitted learner or a suspended replica. */
  private isTransfer(p: PartitionState, node: string, r: ReplicaState): boolean {
    if (r.slot) return true;
    const h = p.history.find((e) => e.node === node);
    if (!h) return p.learners.includes(node);
    return h.suspended;
  }

  private replicate(p: PartitionState, n: string, r: ReplicaState, target: number, dt: number): void {
    const c = this.config;
    const node = this.nodes.get(n)!;
    const transfer = this.isTransfer(p, n, r);
    const needs = r.ckpt !== null || r.durable < target;
    if (transfer && !r.slot) return;
    if (!node.live || p.stalled.includes(n)) {
      if (needs && r.stalledSince === null) r.stalledSince = this.now;
      return;
    }
    r.stalledSince = null;
    if (!needs) {
      if (transfer && this.holds('admit.caught-up', this.caughtUp(p, r))) this.admit(p, n, r);
      return;
    }
    if (transfer) {
      let budget = (c.transferBytesPerSec * dt) / 1000 / Math.max(1, this.slotsInUse.get(n) ?? 1) + r.carry;
      if (!r.ckpt && r.durable < p.logStart) {
        const msgs = Math.min(p.logStart - r.durable, c.retainMessages);
        r.ckpt = { offset: p.logStart, totalBytes: msgs * c.messageBytes, doneBytes: 0 };
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
        const msgs = Math.min(Math.floor(budget / c.messageBytes), Math.max(0, target - r.durable));
        r.durable += msgs;
        budget -= msgs * c.messageBytes;
      }
      r.carry = r.durable >= target ? 0 : Math.min(budget, c.messageBytes);
      if (this.holds('admit.caught-up', this.caughtUp(p, r))) this.admit(p, n, r);
      return;
    }
    let budget = this.followBudget.get(n);
    if (budget === undefined) budget = (c.followMessagesPerSec * dt) / 1000;
    const take = Math.min(Math.floor(budget), target - r.durable);
    r.durable += take;
    this.followBudget.set(n, budget - take);
  }

  /**
   * Caught up: close to the tail and holding every confirmed message the followers were sent. A replica that
   * lost its disk is ineligible until re-admitted (its copies count as lost, within the fault budget); admitted
   * short of the confirmed tail it would be an eligible replica missing confirmed messages, which a seal of
   * E - W + 1 may pick alone (W = E seals one).
   */
  private caughtUp(p: PartitionState, r: ReplicaState): boolean {
    const close = !r.ckpt && p.tail - r.durable <= this.config.catchUpSlack;
    return close && r.durable >= Math.min(p.confirmedTail, p.prevTail);
  }

  /** A caught-up learner or rejoining replica enters (or returns to) the accepted history. */
  private admit(p: PartitionState, n: string, r: ReplicaState): void {
    if (!this.holds('admit.no-pending-recovery', p.pendingRecovery === null)) return;
    // While admission is closed for a handoff, W, the counted copies and the eligible set stay the same.
    if (!this.holds('admit.admission-open', p.admission === 'open')) return;
    const entry = this.bind(n);
    const i = p.history.findIndex((e) => e.node === n);
    if (i >= 0) p.history[i] = entry;
    else p.history.push(entry);
    this.releaseSlot(n, r);
    r.carry = 0;
    this.bump(p);
    this.emit({ type: 'admitted', partition: p.id, node: n, generation: p.generation });
  }

  private rejoinLimit(p: PartitionState): number {
    return Math.max(1, p.writeRequirement - 1);
  }

  /** Suspended replicas waiting for a recovery slot, in a stable order. */
  private waitingRejoins(p: PartitionState): string[] {
    const out: string[] = [];
    for (const h of p.history) {
      const r = p.replicas[h.node];
      if (h.suspended && r && !r.slot && this.nodes.get(h.node)!.live) out.push(h.node);
    }
    return out;
  }

  /** How many more rejoins the limit lets start now. */
  private rejoinsAllowed(p: PartitionState): number {
    if (this.mutants.has('rejoin.limit')) return Infinity;
    let rejoining = 0;
    for (const h of p.history) if (h.suspended && p.replicas[h.node]?.slot) rejoining++;
    return Math.max(0, this.rejoinLimit(p) - rejoining);
  }

  /** Recovery always comes first: a waiting rejoin takes a slot, pausing a rebalancing transfer if it must. */
  private grantRecoverySlots(p: PartitionState): void {
    const c = this.config;
    let allowed = this.rejoinsAllowed(p);
    for (const n of this.waitingRejoins(p)) {
      if (allowed <= 0) return;
      const nodeFull = (this.slotsInUse.get(n) ?? 0) >= c.perNodeLimit;
      if (nodeFull || this.clusterInUse >= c.clusterLimit) {
        if (!this.mutants.has('recovery.priority')) this.pauseRebalance(nodeFull ? n : null);
        if ((this.slotsInUse.get(n) ?? 0) >= c.perNodeLimit || this.clusterInUse >= c.clusterLimit) continue;
      }
      p.replicas[n]!.slot = 'recovery';
      this.takeSlot(n);
      allowed--;
    }
  }

  /**
   * Pauses one running rebalancing transfer (on `node`, or anywhere for the cluster-wide limit): it gives up
   * its slot and makes no progress until no recovery waits for it. Paused is not stalled: nothing is wrong.
   */
  private pauseRebalance(node: string | null): void {
    this.activeOrder ??= [...this.active].sort((a, b) => a.ord - b.ord);
    for (const q of this.activeOrder) {
      for (const n of q.learners) {
        const r = q.replicas[n]!;
        if (r.slot !== 'rebalance' || (node !== null && n !== node)) continue;
        this.releaseSlot(n, r);
        r.pausedForRecovery = true;
        r.stalledSince = null;
        r.carry = 0;
        this.dirtyPartitions.add(q);
        return;
      }
    }
  }

  /** A paused rebalancing transfer takes its slot back once its node is up and the budget has room with recovery served first. */
  private resumePaused(p: PartitionState): void {
    for (const n of p.learners) {
      const r = p.replicas[n]!;
      if (!r.pausedForRecovery || !this.nodes.get(n)!.live || !this.rebalanceRoom(n).room) continue;
      r.pausedForRecovery = false;
      r.slot = 'rebalance';
      this.takeSlot(n);
    }
  }

  /** Whether a rebalancing transfer to n fits: recovery first, then the per-node and cluster limits. */
  private rebalanceRoom(n: string): { room: boolean; inUse: number; waiting: number } {
    const c = this.config;
    const waiting = this.recoveryWaiting();
    const inUse = this.slotsInUse.get(n) ?? 0;
    const room = inUse + (waiting.byNode.get(n) ?? 0) < c.perNodeLimit && this.clusterInUse + waiting.total < c.clusterLimit;
    return { room, inUse, waiting: waiting.total };
  }

  private takeSlot(n: string): void {
    this.slotsInUse.set(n, (this.slotsInUse.get(n) ?? 0) + 1);
    this.clusterInUse++;
  }

  private releaseSlot(n: string, r: ReplicaState): void {
    if (!r.slot) return;
    r.slot = null;
    this.slotsInUse.set(n, (this.slotsInUse.get(n) ?? 1) - 1);
    this.clusterInUse--;
  }

  /** Recovery demand not yet holding a slot (that the rejoin limit lets start): it comes before rebalancing. */
  private recoveryWaiting(): { total: number; byNode: Map<string, number> } {
    const byNode = new Map<string, number>();
    let total = 0;
    for (const p of this.active) {
      if (p.pendingRecovery) continue;
      for (const n of this.waitingRejoins(p).slice(0, this.rejoinsAllowed(p))) {
        byNode.set(n, (byNode.get(n) ?? 0) + 1);
        total++;
      }
    }
    return { total, byNode };
  }

  /** The counted copies: the owner plus live, unsuspended followers. Learners and leaving never count. */
  countedDurables(p: PartitionState): number[] {
    const out = [p.replicas[p.owner]!.durable];
    for (const f of p.followers) {
      if (!this.nodes.get(f)!.live) continue;
      const h = p.history.find((e) => e.node === f);
      if (!h || h.suspended) continue;
      out.push(p.replicas[f]!.durable);
    }
    return out;
  }

  private updateConfirmed(p: PartitionState): void {
    const d = this.countedDurables(p);
    const w = p.writeRequirement;
    if (d.length < w) return;
    d.sort((a, b) => b - a);
    const c = d[w - 1]!;
    if (c > p.confirmedTail) p.confirmedTail = c;
  }

  private moveRelevant(p: PartitionState): boolean {
    return (
      p.learners.length > 0 ||
      p.leaving !== null ||
      p.admission === 'closed' ||
      p.history.some((h) => h.suspended)
    );
  }

  private progressEvent(p: PartitionState): void {
    if (!this.moveRelevant(p)) return;
    const replicas = this.replicaOrder(p).map((n) => {
      const r = p.replicas[n]!;
      return {
        node: n,
        durableOffset: r.durable,
        bytesRemaining: this.bytesRemaining(p, n, r),
        stalled: r.stalledSince !== null,
        pausedForRecovery: r.pausedForRecovery,
      };
    });
    const sig = `${p.generation}|${p.confirmedTail}|${p.boundary?.offset ?? ''}|${replicas
      .map((r) => `${r.node}:${r.durableOffset}:${r.bytesRemaining}:${r.stalled ? 1 : 0}:${r.pausedForRecovery ? 1 : 0}`)
      .join(',')}`;
    if (sig === p.lastProgressSig) return;
    p.lastProgressSig = sig;
    this.emit({
      type: 'progress',
      partition: p.id,
      generation: p.generation,
      confirmedTail: p.confirmedTail,
      boundary: p.boundary?.offset ?? null,
      replicas,
    });
  }

  // ------------------------------------------------------------------ recovery

  private openRecovery(p: PartitionState, reason: string): void {
    if (p.pendingRecovery) return;
    p.pendingRecovery = { epoch: p.epoch, openedAt: this.now, reason, failedOwner: p.owner };
    this.bump(p);
    this.emit({ type: 'recovery_opened', partition: p.id, epoch: p.epoch, failedOwner: p.owner });
  }

  private eligible(p: PartitionState, node: string): boolean {
    const h = p.history.find((e) => e.node === node);
    const bound = this.holds('recovery.eligible-storage', this.nodes.get(node)!.storageInstance === h?.storageInstance);
    return !!h && bound && node in p.replicas;
  }

  /**
   * Seals adversarially: of the surviving eligible replicas it takes the E - W + 1 least up to date, so the
   * pigeonhole argument is all that keeps confirmed messages; the source is the sealed one that holds most.
   */
  private tryActivate(p: PartitionState): void {
    const rec = p.pendingRecovery!;
    const w = p.writeRequirement;
    const need = Math.max(1, p.history.length - w + 1);
    const survivors = p.history
      .filter((h) => this.nodes.get(h.node)!.live && this.eligible(p, h.node))
      .map((h) => h.node);
    if (survivors.length === 0 || !this.holds('recovery.seal-quorum', survivors.length >= need)) return;
    const dur = (n: string) => p.replicas[n]!.durable;
    const sealed = [...survivors].sort((a, b) => dur(a) - dur(b) || cmp(a, b)).slice(0, need);
    const most = sealed.reduce((best, n) => (dur(n) > dur(best) ? n : best), sealed[0]!);
    // sealed is sorted least up to date first: the mutant continues from the one that holds least.
    const source = this.mutants.has('recovery.source-holds-most') ? sealed[0]! : most;
    const liveFollowers = p.followers.filter((f) => survivors.includes(f));
    const counted = liveFollowers.filter((f) => !p.history.find((h) => h.node === f)!.suspended);
    const byDurable = (xs: string[]) => [...xs].sort((a, b) => dur(b) - dur(a) || cmp(a, b))[0];
    let newOwner: string | undefined = counted.includes(source) ? source : byDurable(counted);
    newOwner ??= liveFollowers.includes(source) ? source : byDurable(liveFollowers);
    if (newOwner === undefined && survivors.includes(p.owner)) newOwner = p.owner;
    if (newOwner === undefined) return;

    const newTail = dur(source);
    const failed = p.owner;
    checkActivation(this, p, newOwner, newTail, this.sink);
    for (const n in p.replicas) {
      const r = p.replicas[n]!;
      if (r.durable > newTail) r.durable = newTail;
      if (r.ckpt && r.ckpt.offset > newTail) r.ckpt = null;
    }
    const ownerRep = p.replicas[newOwner]!;
    ownerRep.durable = newTail;
    ownerRep.ckpt = null;
    ownerRep.stalledSince = null;
    this.releaseSlot(newOwner, ownerRep);
    if (newOwner !== failed) {
      p.followers = p.followers.map((f) => (f === newOwner ? failed : f));
      p.owner = newOwner;
    }
    const oi = p.history.findIndex((h) => h.node === newOwner);
    p.history[oi] = this.bind(newOwner);
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
    this.bump(p);
    this.emit({ type: 'recovery_activated', partition: p.id, epoch: p.epoch, owner: newOwner, generation: p.generation });
    if (wasClosed) this.emit({ type: 'admission_reopened', partition: p.id });
    if (failed !== newOwner && this.nodes.get(failed)!.live) this.suspend(p, failed);
    checkPartition(this, p, this.sink, 'recovery activation');
  }

  private suspend(p: PartitionState, n: string): void {
    const h = p.history.find((e) => e.node === n);
    if (!h || h.suspended) return;
    h.suspended = true;
    this.bump(p);
    this.emit({ type: 'suspended', partition: p.id, node: n, generation: p.generation });
  }

  // ------------------------------------------------------------------ faults and controls

  fault(f: Fault): string {
    switch (f.fault) {
      case 'crash-node': {
        const n = this.node(f.node);
        if (!n.live) return `${n.id} is already down`;
        this.crash(n);
        return `${n.id} crashed`;
      }
      case 'restart-node': {
        const n = this.node(f.node);
        if (n.live) this.crash(n);
        this.restart(n);
        return `${n.id} restarted as ${n.processId}`;
      }
      case 'lose-disk': {
        const n = this.node(f.node);
        this.loseDisk(n);
        return `${n.id} lost its disk; new storage instance ${n.storageInstance}`;
      }
      case 'fail-owner': {
        const p = this.partition(f.partition);
        if (p.pendingRecovery) return `${p.id} already has a pending recovery`;
        this.wake(p);
        this.openRecovery(p, 'owner failed (injected)');
        return `${p.id}: owner ${p.owner} failed, recovery opened at epoch ${p.epoch}`;
      }
      case 'delay-events':
        // Never shortened: the feed stays in order, so later events wait behind delayed ones.
        this.delayUntil = Math.max(this.delayUntil, this.now + f.ms);
        return `events emitted until ${this.delayUntil} become readable at ${this.delayUntil}`;
      case 'drop-events':
        this.dropCount = f.count;
        return `the next ${f.count} events are dropped`;
      case 'refuse-next-write': {
        if (f.partition !== undefined) this.partition(f.partition);
        const inj: Injection = {};
        if (f.partition !== undefined) inj.partition = f.partition;
        if (f.write !== undefined) inj.write = f.write;
        this.injections.push(inj);
        return `the next ${f.write ?? 'guarded write'} on ${f.partition ?? 'any partition'} is refused`;
      }
      case 'set-draining':
        this.setDraining(f.node, f.draining);
        return `${f.node} ${f.draining ? 'is draining' : 'is no longer draining'}`;
      case 'stall-transfer': {
        const p = this.partition(f.partition);
        this.node(f.node);
        this.wake(p);
        const has = p.stalled.includes(f.node);
        if (f.stalled && !has) p.stalled.push(f.node);
        if (!f.stalled && has) p.stalled = p.stalled.filter((n) => n !== f.node);
        this.dirtyPartitions.add(p);
        return `${p.id} replication to ${f.node} ${f.stalled ? 'stalled' : 'resumed'}`;
      }
    }
  }

  private partitionsOn(node: string): PartitionState[] {
    const out: PartitionState[] = [];
    for (const p of this.partitions.values()) {
      if (node in p.replicas || p.retainedCopies.some((c) => c.node === node)) out.push(p);
    }
    return out;
  }

  /** Wakes the node's partitions at now, before the node changes: their offsets so far depend on it. */
  private wakeOn(node: string): PartitionState[] {
    const ps = this.partitionsOn(node);
    for (const p of ps) this.wake(p);
    return ps;
  }

  private crash(n: NodeState): void {
    const ps = this.wakeOn(n.id);
    n.live = false;
    this.dirtyNodes.add(n);
    this.generation++;
    this.emit({ type: 'node_down', node: n.id });
    for (const p of ps) {
      const r = p.replicas[n.id];
      // A transfer to a down node cannot progress: its slot goes back to the sync budget, or a node lost for
      // good would shrink it for good. Once the node is up, it takes one through the normal grant path.
      if (r?.slot) {
        this.releaseSlot(n.id, r);
        r.carry = 0;
        r.stalledSince ??= this.now;
      }
      if (p.owner === n.id) this.openRecovery(p, `owner node ${n.id} crashed`);
    }
  }

  private restart(n: NodeState): void {
    const ps = this.wakeOn(n.id);
    n.live = true;
    n.processId = `${n.id}-p${this.prng.hex()}`;
    this.dirtyNodes.add(n);
    this.generation++;
    this.emit({ type: 'node_up', node: n.id, processId: n.processId });
    for (const p of ps) {
      // A restarted replica's process no longer matches the history: it rejoins through learner admission.
      if (n.id in p.replicas && p.owner !== n.id) this.suspend(p, n.id);
      // A learner that lost its slot when the node went down waits behind the node's rejoins, which come first.
      const r = p.replicas[n.id];
      if (r && !r.slot && p.learners.includes(n.id) && !p.history.some((h) => h.node === n.id)) {
        r.pausedForRecovery = true;
        r.stalledSince = null;
      }
    }
  }

  private loseDisk(n: NodeState): void {
    const ps = this.wakeOn(n.id);
    n.storageInstance = `${n.id}-s${this.prng.hex()}`;
    this.dirtyNodes.add(n);
    this.generation++;
    this.emit({ type: 'disk_lost', node: n.id });
    for (const p of ps) {
      if (p.retainedCopies.some((c) => c.node === n.id)) {
        p.retainedCopies = p.retainedCopies.filter((c) => c.node !== n.id);
      }
      const r = p.replicas[n.id];
      if (!r) continue;
      const h = p.history.find((e) => e.node === n.id);
      if (h && r.durable > 0) p.lostCopies.push({ node: n.id, durableAtLoss: r.durable, at: this.now });
      r.durable = 0;
      r.ckpt = null;
      r.carry = 0;
      if (p.owner === n.id) this.openRecovery(p, `owner node ${n.id} lost its disk`);
      else this.suspend(p, n.id);
      checkPartition(this, p, this.sink, `disk loss on ${n.id}`);
    }
  }

  joinNode(id: string, capacity = 1, zone = 'z1'): Node {
    if (this.nodes.has(id)) throw new NodeExistsError(id);
    const n = this.addNode(id, capacity, zone);
    this.generation++;
    this.emit({ type: 'node_joined', node: id });
    return this.nodeView(n, 0);
  }

  /** Marks a node as draining: add-learner then refuses it with node_draining. */
  setDraining(id: string, draining: boolean): void {
    const n = this.node(id);
    n.draining = draining;
    this.dirtyNodes.add(n);
    this.generation++;
  }

  publish(partitionId: string, count: number): { firstOffset: number; nextOffset: number } {
    const p = this.partition(partitionId);
    this.wake(p);
    this.dirtyPartitions.add(p);
    if (this.serving(p) && p.admission === 'open') {
      const first = p.tail;
      p.tail += count;
      p.replicas[p.owner]!.durable = p.tail;
      return { firstOffset: first, nextOffset: p.tail };
    }
    const first = p.tail + p.waiting;
    p.waiting += count;
    return { firstOffset: first, nextOffset: first + count };
  }

  setRate(partitionId: string, publishRate: number): PartitionView {
    const p = this.partition(partitionId);
    this.wake(p);
    p.publishRate = publishRate;
    this.dirtyPartitions.add(p);
    return this.partitionView(partitionId);
  }

  /** Test control: a new partition on live nodes, owner first; the caller checked the id is new. */
  createPartition(id: string, kind: 'queue' | 'stream', replicas: string[], initialMessages?: number): PartitionView {
    for (const n of replicas) {
      if (!this.node(n).live) throw new Error(`cannot place ${id} on ${n}: it is down`);
    }
    this.addPartition(id, kind, replicas, replicas.length, initialMessages);
    this.dirtyPartitions.add(this.partition(id));
    this.generation++;
    return this.partitionView(id);
  }

  /**
   * Test control: forgets a partition entirely (its transfer slots, retained copies and pending injected
   * refusals with it), so a test leaves the topology as it found it. Events already emitted stay in the feed.
   */
  deletePartition(id: string): void {
    const p = this.partition(id);
    for (const [n, r] of Object.entries(p.replicas)) this.releaseSlot(n, r);
    this.partitions.delete(id);
    this.active.delete(p);
    this.activeOrder = null;
    this.dirtyPartitions.delete(p);
    this.retainedQueue = this.retainedQueue.filter((q) => q.partition !== id);
    this.injections = this.injections.filter((i) => i.partition !== id);
    this.generation++;
  }

  /** Why the node cannot be deleted: every partition that still holds it, and how. Empty: it can be. */
  nodeInUse(id: string): string[] {
    this.node(id);
    const uses: string[] = [];
    for (const p of this.partitions.values()) {
      const role = this.roleOf(p, id);
      if (role !== null) uses.push(`${role} of ${p.id}`);
      else if (id in p.replicas || p.history.some((h) => h.node === id)) uses.push(`replica of ${p.id}`);
      if (p.retainedCopies.some((c) => c.node === id)) uses.push(`retained copy of ${p.id}`);
      if (p.stalled.includes(id)) uses.push(`stalled transfer of ${p.id}`);
    }
    return uses;
  }

  /** Test control: removes a node nothing holds (see nodeInUse; the caller checked). */
  deleteNode(id: string): void {
    const uses = this.nodeInUse(id);
    if (uses.length > 0) throw new Error(`node ${id} is still in use: ${uses.join(', ')}`);
    const n = this.node(id);
    this.nodes.delete(id);
    this.dirtyNodes.delete(n);
    this.slotsInUse.delete(id);
    this.generation++;
  }

  // ------------------------------------------------------------------ guarded writes

  write<N extends GuardedWriteName>(partitionId: string, name: N, req: GuardedWriteRequest<N>): WriteReply {
    const p = this.partition(partitionId);
    this.materialize(p);
    try {
      const wBefore = p.writeRequirement;
      const boundary = this.apply(p, name, req as GuardedWriteRequest<GuardedWriteName>);
      this.bump(p);
      this.emit({ type: 'assignment_changed', partition: p.id, write: name, generation: p.generation });
      if (name !== 'promote-learner' && p.writeRequirement !== wBefore) {
        this.recordBreach(
          {
            invariant: 3,
            partition: p.id,
            offset: null,
            detail: `${name} changed W from ${wBefore} to ${p.writeRequirement}`,
            state: this.stateOf(p),
          },
          `3:${p.id}:${p.generation}`,
        );
      }
      checkPartition(this, p, this.sink, name);
      this.wake(p);
      this.tryAnchor(p);
      return { ok: true, write: name, partition: this.partitionRecord(p), boundary };
    } catch (e) {
      if (e instanceof Refused) {
        return { ok: false, write: name, refusal: { code: e.code, message: e.message, saw: e.saw } };
      }
      throw e;
    }
  }

  private apply(p: PartitionState, name: GuardedWriteName, req: GuardedWriteRequest<GuardedWriteName>): number | null {
    if (!this.holds('write.queue-only', p.kind === 'queue')) {
      throw new Refused('not_a_queue', `${p.id} is a stream; moves apply to queues only`, { kind: p.kind });
    }
    const inj = this.injections.findIndex(
      (i) => (i.partition === undefined || i.partition === p.id) && (i.write === undefined || i.write === name),
    );
    if (inj >= 0) {
      this.injections.splice(inj, 1);
      throw new Refused('injected', `refused by an injected fault (refuse-next-write)`, { fault: 'refuse-next-write' });
    }
    if (!this.holds('write.no-pending-recovery', p.pendingRecovery === null)) {
      throw new Refused('pending_recovery', `${p.id} has a pending recovery; guarded writes wait for activation`, {
        ...p.pendingRecovery,
      });
    }
    if (!this.holds('write.generation-matches', req.expectedGeneration === p.generation)) {
      throw new Refused(
        'generation_mismatch',
        `expected generation ${req.expectedGeneration} but ${p.id} is at ${p.generation}; re-read and retry`,
        { expected: req.expectedGeneration, current: p.generation },
      );
    }
    // Nothing changes who counts while admission is closed for a handoff (W, counted copies, eligible set).
    const handoff = name === 'commit-owner' || name === 'reopen-admission';
    if (!this.holds('write.admission-open', handoff || p.admission === 'open')) {
      throw new Refused('admission_closed', `${p.id} has admission closed for an owner handoff; only commit-owner and reopen-admission are accepted`, {
        admission: p.admission,
        finalBoundary: p.finalBoundary,
      });
    }
    switch (name) {
      case 'add-learner':
        return this.addLearner(p, (req as GuardedWriteRequest<'add-learner'>).node);
      case 'drop-learner':
        return this.dropLearner(p, (req as GuardedWriteRequest<'drop-learner'>).node);
      case 'swap': {
        const r = req as GuardedWriteRequest<'swap'>;
        return this.swap(p, r.learner, r.leaving);
      }
      case 'remove-leaving':
        return this.removeLeaving(p, (req as GuardedWriteRequest<'remove-leaving'>).node);
      case 'promote-learner':
        return this.promote(p, (req as GuardedWriteRequest<'promote-learner'>).node);
      case 'close-admission':
        return this.closeAdmission(p);
      case 'commit-owner': {
        const r = req as GuardedWriteRequest<'commit-owner'>;
        return this.commitOwner(p, r.newOwner, r.certificate);
      }
      case 'reopen-admission':
        return this.reopenAdmission(p);
    }
  }

  private roleOf(p: PartitionState, n: string): ReplicaRole | null {
    if (p.owner === n) return 'owner';
    if (p.followers.includes(n)) return 'follower';
    if (p.leaving === n) return 'leaving';
    if (p.learners.includes(n)) return 'learner';
    return null;
  }

  /** The mutant lets a follower through, never the owner, the leaving replica or a node holding no replica. */
  private requireLearner(p: PartitionState, n: string, rule: MutantName): ReplicaState {
    const r = p.replicas[n];
    if (!r || n === p.owner || n === p.leaving || !this.holds(rule, p.learners.includes(n))) {
      throw new Refused('not_a_learner', `${n} is not a learner of ${p.id}`, { node: n, learners: p.learners });
    }
    return r;
  }

  private requireAdmittedCaughtUp(
    p: PartitionState,
    n: string,
    r: ReplicaState,
    rules: { admitted: MutantName; caughtUp: MutantName; coverConfirmed: boolean },
  ): void {
    const { coverConfirmed } = rules;
    const h = p.history.find((e) => e.node === n);
    if (!this.holds(rules.admitted, !!h && !h.suspended)) {
      throw new Refused('not_admitted', `${n} is not (yet) admitted to the accepted history of ${p.id}`, {
        node: n,
        suspended: h?.suspended ?? false,
      });
    }
    const slack = this.config.catchUpSlack;
    const behind = p.tail - r.durable > slack;
    if (!this.holds(rules.caughtUp, !behind && !(coverConfirmed && r.durable < p.confirmedTail))) {
      throw new Refused(
        'not_caught_up',
        coverConfirmed
          ? `${n} must be durable at the confirmed tail ${p.confirmedTail} and within ${slack} of the tail ${p.tail}; it is at ${r.durable}`
          : `${n} is durable at ${r.durable}, more than ${slack} messages behind the tail ${p.tail}`,
        { node: n, durableOffset: r.durable, tail: p.tail, confirmedTail: p.confirmedTail, slack },
      );
    }
  }

  private addLearner(p: PartitionState, n: string): null {
    const node = this.nodes.get(n);
    if (!this.holds('add-learner.known-node', !!node)) throw new Refused('unknown_node', `no node ${n} is registered`, { node: n });
    if (!this.holds('add-learner.node-live', node?.live === true)) throw new Refused('node_down', `${n} is down`, { node: n, live: false });
    if (!this.holds('add-learner.not-draining', node?.draining !== true)) {
      throw new Refused('node_draining', `${n} is draining`, { node: n, draining: true });
    }
    const role = this.roleOf(p, n);
    if (!this.holds('add-learner.not-a-replica', role === null)) {
      throw new Refused('already_a_replica', `${n} is already the ${role} of ${p.id}`, { node: n, role });
    }
    if (!this.holds('add-learner.one-change', p.learners.length === 0 && !p.leaving)) {
      throw new Refused('change_in_flight', `${p.id} already has a change in flight`, {
        learners: p.learners,
        leaving: p.leaving,
      });
    }
    const c = this.config;
    const { room, inUse, waiting } = this.rebalanceRoom(n);
    if (!this.holds('add-learner.sync-budget', room)) {
      throw new Refused('no_sync_budget', `no transfer slot for ${n}: recovery first, then the per-node and cluster limits`, {
        node: n,
        inUse,
        limit: c.perNodeLimit,
        clusterInUse: this.clusterInUse,
        clusterLimit: c.clusterLimit,
        recoveryWaiting: waiting,
      });
    }
    const retained = p.retainedCopies.find((rc) => rc.node === n && rc.storageInstance === node?.storageInstance);
    const r = newReplica(retained ? Math.min(retained.safeOffset, p.tail) : 0);
    r.slot = 'rebalance';
    this.takeSlot(n);
    p.replicas[n] = r;
    p.learners.push(n);
    if (retained) p.retainedCopies = p.retainedCopies.filter((rc) => rc !== retained);
    return null;
  }

  private retain(p: PartitionState, n: string, r: ReplicaState): void {
    const node = this.nodes.get(n)!;
    p.retainedCopies = p.retainedCopies.filter((c) => c.node !== n);
    const until = this.now + this.config.retainGraceMs;
    p.retainedCopies.push({
      node: n,
      durableOffset: r.durable,
      removedAt: this.now,
      retainedUntil: until,
      safeOffset: Math.min(r.durable, p.confirmedTail),
      storageInstance: node.storageInstance,
    });
    this.retainedQueue.push({ until, partition: p.id });
    this.releaseSlot(n, r);
    delete p.replicas[n];
  }

  private dropLearner(p: PartitionState, n: string): null {
    this.removeReplica(p, n, this.requireLearner(p, n, 'drop-learner.is-learner'));
    return null;
  }

  /** Takes n out of every role and the eligible set, keeping its data as a retained copy. */
  private removeReplica(p: PartitionState, n: string, r: ReplicaState): void {
    p.learners = p.learners.filter((x) => x !== n);
    p.followers = p.followers.filter((x) => x !== n);
    p.history = p.history.filter((h) => h.node !== n);
    if (p.leaving === n) {
      p.leaving = null;
      p.boundary = null;
    }
    this.retain(p, n, r);
  }

  private swap(p: PartitionState, learner: string, leaving: string): number {
    const r = this.requireLearner(p, learner, 'swap.is-learner');
    // A failed target never starts to count ("if T fails before step 1, drop the learner").
    if (!this.holds('swap.learner-live', this.nodes.get(learner)!.live)) {
      throw new Refused('node_down', `${learner} is down; drop the learner rather than make it count`, { node: learner, live: false });
    }
    this.requireAdmittedCaughtUp(p, learner, r, { admitted: 'swap.learner-admitted', caughtUp: 'swap.learner-caught-up', coverConfirmed: false });
    if (!this.holds('swap.leaving-is-follower', p.followers.includes(leaving) && leaving !== p.owner)) {
      throw new Refused('not_a_follower', `${leaving} is not a follower of ${p.id}`, {
        node: leaving,
        owner: p.owner,
        followers: p.followers,
      });
    }
    if (!this.holds('swap.one-change', !p.leaving)) {
      throw new Refused('change_in_flight', `${p.leaving} is already leaving ${p.id}`, { leaving: p.leaving });
    }
    p.learners = p.learners.filter((x) => x !== learner);
    p.followers = p.followers.map((f) => (f === leaving ? learner : f));
    p.leaving = leaving;
    p.boundary = { offset: p.confirmedTail, joined: learner, leaving, epoch: p.epoch };
    return p.confirmedTail;
  }

  private removeLeaving(p: PartitionState, n: string): null {
    const removed = p.replicas[n];
    if (!removed || n === p.owner || !this.holds('remove-leaving.is-leaving', p.leaving === n) || !p.boundary) {
      throw new Refused('not_leaving', `${n} is not the leaving replica of ${p.id}`, { node: n, leaving: p.leaving });
    }
    const b = p.boundary;
    // R stays eligible while T is down ("until T returns or recovery resolves the partition").
    if (!this.holds('remove-leaving.joined-live', this.nodes.get(b.joined)?.live === true)) {
      throw new Refused('node_down', `${b.joined}, the replica that joined in ${n}'s place, is down; ${n} stays until it returns`, {
        node: b.joined,
        live: false,
      });
    }
    const joinedDurable = p.replicas[b.joined]?.durable ?? 0;
    const covered = joinedDurable >= b.offset;
    if (!this.holds('remove-leaving.boundary-covered', covered)) {
      throw new Refused(
        'boundary_not_covered',
        `${b.joined} is durable at ${joinedDurable}, below the switch boundary ${b.offset}`,
        { boundary: b.offset, durable: joinedDurable, joined: b.joined },
      );
    }
    // An admission in flight is a replica actually rejoining: suspended and live (holding a recovery slot or
    // waiting for one), so it may re-enter the history at any moment. Not R itself: removing it is the point.
    // Not a suspended replica whose node is down: it can rejoin only after its node returns, so waiting for it
    // could block the partition forever. Removing R next to such a replica is safe: a suspended replica never
    // counts toward a confirm, so the confirm sets of step 2's argument (W copies of the old set below B, with T
    // standing in for R; W counted copies of the new set above it) do not depend on it, and it stays in the
    // eligible set E with its disk, so a recovery sealing E - W + 1 of E still meets every confirm set.
    const rejoining = p.history
      .filter((h) => h.suspended && h.node !== n && this.nodes.get(h.node)!.live)
      .map((h) => h.node);
    if (!this.holds('remove-leaving.no-admission-in-flight', p.learners.length === 0 && rejoining.length === 0)) {
      throw new Refused('change_in_flight', `${p.id} has an admission in flight`, { learners: p.learners, rejoining });
    }
    // A self-report: reachable only when a test removed the boundary check (the checker sees the loss itself).
    if (!covered) {
      this.recordBreach(
        {
          invariant: 4,
          partition: p.id,
          offset: joinedDurable,
          detail: `removed ${n} while ${b.joined} was durable at ${joinedDurable}, below the boundary ${b.offset}`,
          state: this.stateOf(p),
        },
        `4:${p.id}:${p.generation}`,
      );
    }
    this.removeReplica(p, n, removed);
    return null;
  }

  private promote(p: PartitionState, n: string): null {
    const r = this.requireLearner(p, n, 'promote-learner.is-learner');
    this.requireAdmittedCaughtUp(p, n, r, {
      admitted: 'promote-learner.learner-admitted',
      caughtUp: 'promote-learner.covers-confirmed',
      coverConfirmed: true,
    });
    if (!this.holds('promote-learner.max-replication-factor', p.replicationFactor < 16)) {
      throw new Refused('change_in_flight', `${p.id} is at the maximum replication factor 16`, {
        replicationFactor: p.replicationFactor,
      });
    }
    p.segments.push({ upTo: p.confirmedTail, w: p.writeRequirement });
    p.learners = p.learners.filter((x) => x !== n);
    p.followers.push(n);
    p.replicationFactor++;
    p.writeRequirement = writeRequirement(p.durability, p.replicationFactor);
    return null;
  }

  private closeAdmission(p: PartitionState): number {
    if (!this.holds('close-admission.owner-live', this.nodes.get(p.owner)!.live)) {
      throw new Refused('node_down', `owner ${p.owner} is down`, { node: p.owner });
    }
    if (!this.holds('close-admission.no-change-in-flight', p.learners.length === 0 && !p.leaving)) {
      throw new Refused('change_in_flight', `${p.id} has a move in flight`, { learners: p.learners, leaving: p.leaving });
    }
    p.admission = 'closed';
    p.finalBoundary = p.tail;
    this.emit({ type: 'admission_closed', partition: p.id, finalBoundary: p.tail });
    return p.tail;
  }

  private commitOwner(p: PartitionState, newOwner: string, cert: { finalBoundary: number; epoch: number }): null {
    if (!this.holds('commit-owner.admission-closed', p.admission === 'closed' && p.finalBoundary !== null)) {
      throw new Refused('admission_open', `${p.id} has admission open; close it first`, { admission: p.admission });
    }
    if (!this.holds('commit-owner.certificate-matches', cert.epoch === p.epoch && cert.finalBoundary === p.finalBoundary)) {
      throw new Refused('certificate_mismatch', `the certificate does not match epoch ${p.epoch} and final boundary ${p.finalBoundary}`, {
        epoch: p.epoch,
        finalBoundary: p.finalBoundary,
        certificate: cert,
      });
    }
    const h = p.history.find((e) => e.node === newOwner);
    if (!(newOwner in p.replicas) || !this.holds('commit-owner.counted-follower', p.followers.includes(newOwner) && !!h && !h.suspended)) {
      throw new Refused('not_a_follower', `${newOwner} is not a counted follower of ${p.id}`, {
        node: newOwner,
        followers: p.followers,
        suspended: h?.suspended ?? false,
      });
    }
    if (!this.holds('commit-owner.new-owner-live', this.nodes.get(newOwner)!.live)) {
      throw new Refused('node_down', `${newOwner} is down`, { node: newOwner });
    }
    const fb = p.finalBoundary ?? p.tail;
    const lagging = [p.owner, ...p.followers]
      .filter((n) => n === p.owner || this.countsNow(p, n))
      .map((n) => ({ node: n, durable: p.replicas[n]!.durable }))
      .filter((x) => x.durable < fb);
    if (!this.holds('commit-owner.counted-caught-up', lagging.length === 0)) {
      throw new Refused('not_caught_up', `counted copies are not all durable at the final boundary ${fb}`, {
        finalBoundary: fb,
        lagging,
      });
    }
    const old = p.owner;
    p.followers = p.followers.map((f) => (f === newOwner ? old : f));
    p.owner = newOwner;
    p.tail = p.replicas[newOwner]!.durable;
    p.epoch++;
    return null;
  }

  private countsNow(p: PartitionState, n: string): boolean {
    const h = p.history.find((e) => e.node === n);
    return !!h && !h.suspended && this.nodes.get(n)!.live;
  }

  private reopenAdmission(p: PartitionState): null {
    if (!this.holds('reopen-admission.admission-closed', p.admission === 'closed')) {
      throw new Refused('admission_open', `${p.id} already has admission open`, { admission: 'open' });
    }
    p.admission = 'open';
    p.finalBoundary = null;
    this.emit({ type: 'admission_reopened', partition: p.id });
    return null;
  }

  // ------------------------------------------------------------------ reads

  private node(id: string): NodeState {
    const n = this.nodes.get(id);
    if (!n) throw new UnknownNodeError(id);
    return n;
  }

  partition(id: string): PartitionState {
    const p = this.partitions.get(id);
    if (!p) throw new UnknownPartitionError(id);
    return p;
  }

  hasPartition(id: string): boolean {
    return this.partitions.has(id);
  }

  hasNode(id: string): boolean {
    return this.nodes.has(id);
  }

  private nodeView(n: NodeState, rate: number): Node {
    const { id, processId, storageInstance, live, capacity, zone, draining } = n;
    return { id, processId, storageInstance, live, capacity, zone, publishRate: rate, deliveryRate: rate, draining };
  }

  partitionRecord(p: PartitionState): Partition {
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
      retainedCopies: p.retainedCopies.map(({ node, durableOffset, removedAt, retainedUntil }) => ({
        node,
        durableOffset,
        removedAt,
        retainedUntil,
      })),
    };
  }

  topology(): Topology {
    const partitions: Partition[] = [];
    for (const p of this.partitions.values()) partitions.push(this.partitionRecord(p));
    return { contractVersion: CONTRACT_VERSION, ...this.nodesView(), partitions };
  }

  nodesView(): NodesView {
    const rates = new Map<string, number>();
    for (const p of this.partitions.values()) {
      if (this.serving(p)) rates.set(p.owner, (rates.get(p.owner) ?? 0) + p.publishRate);
    }
    return {
      generation: this.generation,
      now: this.now,
      nodes: [...this.nodes.values()].map((n) => this.nodeView(n, n.live ? (rates.get(n.id) ?? 0) : 0)),
    };
  }

  private replicaOrder(p: PartitionState): string[] {
    const out = [p.owner, ...p.followers];
    if (p.leaving) out.push(p.leaving);
    out.push(...p.learners);
    return out;
  }

  private bytesRemaining(p: PartitionState, n: string, r: ReplicaState): number {
    if (n === p.owner) return 0;
    const ckpt = r.ckpt ? r.ckpt.totalBytes - r.ckpt.doneBytes : 0;
    const from = r.ckpt ? r.ckpt.offset : r.durable;
    const msgs = Math.max(0, p.tail - from);
    if (!r.ckpt && msgs <= this.config.catchUpSlack) return 0;
    return Math.ceil(ckpt + msgs * this.config.messageBytes);
  }

  progress(id: string): Progress {
    const p = this.partition(id);
    this.materialize(p);
    const replicas: ReplicaProgress[] = this.replicaOrder(p).map((n) => {
      const r = p.replicas[n]!;
      const h = p.history.find((e) => e.node === n);
      const node = this.nodes.get(n)!;
      const bytes = this.bytesRemaining(p, n, r);
      const phase =
        r.ckpt || (n !== p.owner && r.durable < p.logStart)
          ? 'checkpoint'
          : p.tail - r.durable > this.config.catchUpSlack
            ? 'tail'
            : 'caught_up';
      return {
        node: n,
        role: this.roleOf(p, n)!,
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
      now: this.now,
      tail: p.tail,
      confirmedTail: p.confirmedTail,
      logStart: p.logStart,
      messageBytes: this.config.messageBytes,
      boundary: p.boundary?.offset ?? null,
      replicas,
    };
  }

  partitionView(id: string): PartitionView {
    const progress = this.progress(id);
    return { partition: this.partitionRecord(this.partition(id)), progress };
  }

  syncBudget(): SyncBudget {
    const c = this.config;
    const transfers: SyncBudget['transfers'] = [];
    for (const p of this.active) {
      for (const n in p.replicas) {
        const r = p.replicas[n]!;
        if (!r.slot && !r.pausedForRecovery) continue;
        transfers.push({
          partition: p.id,
          node: n,
          kind: r.slot === 'recovery' ? 'recovery' : 'rebalance',
          bytesRemaining: this.bytesRemaining(p, n, r),
          pausedForRecovery: r.pausedForRecovery,
        });
      }
    }
    return {
      perNodeLimit: c.perNodeLimit,
      clusterLimit: c.clusterLimit,
      clusterInUse: this.clusterInUse,
      nodes: [...this.nodes.keys()].map((n) => ({ node: n, inUse: this.slotsInUse.get(n) ?? 0, limit: c.perNodeLimit })),
      transfers,
    };
  }

  /** A compact picture of one partition for breach reports. */
  stateOf(p: PartitionState): Record<string, unknown> {
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
      eligible: p.history.filter((h) => this.nodes.get(h.node)!.storageInstance === h.storageInstance).map((h) => h.node),
      durables,
      tail: p.tail,
      confirmedTail: p.confirmedTail,
      segments: p.segments,
      lostCopies: p.lostCopies,
      boundary: p.boundary,
      pendingRecovery: p.pendingRecovery,
    };
  }

  /** Eligible holders' storage check, shared with the invariant checker. */
  storageOf(node: string): string | undefined {
    return this.nodes.get(node)?.storageInstance;
  }

}

function newReplica(durable: number): ReplicaState {
  return { durable, carry: 0, ckpt: null, slot: null, pausedForRecovery: false, stalledSince: null };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function breachKey(b: Breach): string {
  const key = b.state.key;
  return typeof key === 'string' ? key : `${b.invariant}:${b.partition}:${b.offset ?? ''}:${b.at}`;
}
