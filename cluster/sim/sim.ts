/**
 * The reference cluster's simulation core: nodes, queue and stream partitions, replication, learners,
 * guarded writes, recovery and the safety checker. No I/O: the store persists what takeChanges() returns and
 * the server maps HTTP onto these methods. Time is simulated milliseconds and only moves in advance().
 * ClusterSim holds the state and is the public face; the concepts live next to it: writes.ts (the guarded
 * writes), replication.ts and sync-budget.ts (catch-up under the sync budget), recovery.ts, anchor.ts (quiet
 * partitions are not stepped), faults.ts (faults and test controls) and views.ts (reads).
 */
import {
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
  type SyncBudget,
  type Topology,
  type TopologyChanges,
  type TopologyPage,
  type WriteReply,
} from '../contract';
import * as anchor from './anchor';
import { UnknownNodeError, UnknownPartitionError } from './errors';
import * as faults from './faults';
import type { BreachSink } from './invariants';
import type { MutantName } from './mutants';
import { Prng } from './prng';
import * as replication from './replication';
import * as budget from './sync-budget';
import {
  defaultConfig,
  newReplica,
  type Injection,
  type NodeState,
  type PartitionSettings,
  type PartitionState,
  type ReplicaState,
  type SimChanges,
  type SimConfig,
  type SimMeta,
  type SimSnapshot,
  type StoredEvent,
} from './types';
import * as views from './views';
import * as writes from './writes';

export { NodeExistsError, UnknownNodeError, UnknownPartitionError } from './errors';

export interface InitOptions {
  nodes: number;
  partitions: number;
  streams: number;
  config?: Partial<SimConfig>;
}

type EventBody = ClusterEvent extends infer E ? (E extends ClusterEvent ? Omit<E, 'seq' | 'at'> : never) : never;

const MAX_BREACHES = 10_000;

export class ClusterSim {
  readonly config: SimConfig;
  now: number;
  generation: number;
  checks: number;
  /** Test-only: the rules (cluster/sim/mutants.ts) whose check is skipped. In memory only, never persisted. */
  readonly mutants = new Set<MutantName>();
  readonly nodes = new Map<string, NodeState>();
  readonly partitions = new Map<string, PartitionState>();

  private lastSeq: number;
  /** Creation order of the next partition: never reused after a delete, so stepping order survives restarts. */
  private nextOrd = 0;
  private readonly breaches: Breach[] = [];
  /**
   * Changes are answered from this generation on: deletions are remembered in memory only, so a reader that
   * last read before this process started reads the whole topology again.
   */
  private readonly changesFrom: number;
  private readonly removedAt = new Map<string, number>();
  private readonly breachKeys = new Set<string>();
  private outbox: StoredEvent[] = [];
  private newBreaches: Breach[] = [];

  // The state the concept modules of cluster/sim share (not API for the server or tests).
  readonly prng: Prng;
  injections: Injection[];
  delayUntil: number;
  dropCount: number;
  /** Partitions that are stepped every tick (not anchored). */
  readonly active = new Set<PartitionState>();
  /** The active set in creation order, rebuilt only when the set changed. */
  activeOrder: PartitionState[] | null = null;
  /** Partition ids in code-unit order, for the topology's pages; null once a partition is created or deleted. */
  idOrder: string[] | null = null;
  readonly slotsInUse = new Map<string, number>();
  clusterInUse = 0;
  /** Retained copies in expiry order (retainedUntil only ever grows with now). */
  retainedQueue: { until: number; partition: string }[] = [];
  readonly followBudget = new Map<string, number>();
  dirtyNodes = new Set<NodeState>();
  dirtyPartitions = new Set<PartitionState>();
  readonly sink: BreachSink;

  private constructor(meta: SimMeta) {
    this.config = meta.config;
    this.now = meta.now;
    this.generation = meta.generation;
    this.changesFrom = meta.generation;
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
      for (const [node, r] of Object.entries(p.replicas)) if (r.slot) budget.takeSlot(sim, node);
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

  // ------------------------------------------------------------------ setup (shared with the concept modules)

  addNode(id: string, capacity: number, zone: string): NodeState {
    const node: NodeState = {
      id,
      processId: `${id}-p${this.prng.hex()}`,
      storageInstance: `${id}-s${this.prng.hex()}`,
      live: true,
      downSince: null,
      capacity,
      zone,
      draining: false,
    };
    this.nodes.set(id, node);
    this.dirtyNodes.add(node);
    return node;
  }

  addPartition(id: string, kind: 'queue' | 'stream', placed: string[], rf: number, settings: PartitionSettings = {}): void {
    const c = this.config;
    const tail = settings.initialMessages ?? c.initialMessages;
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
      publishRate: settings.publishRate ?? c.publishRate,
      messageBytes: settings.messageBytes ?? c.messageBytes,
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
    this.idOrder = null;
    if (!anchor.tryAnchor(this, p)) anchor.activate(this, p);
  }

  bind(node: string): { node: string; processId: string; storageInstance: string; suspended: boolean } {
    const n = this.nodes.get(node)!;
    return { node, processId: n.processId, storageInstance: n.storageInstance, suspended: false };
  }

  // ------------------------------------------------------------------ events and breaches

  emit(body: EventBody): void {
    const seq = ++this.lastSeq;
    if (this.dropCount > 0) {
      this.dropCount--;
      return;
    }
    const event = { seq, at: this.now, ...body } as ClusterEvent;
    this.outbox.push({ event, visibleAt: Math.max(this.now, this.delayUntil) });
  }

  recordBreach(b: Omit<Breach, 'at'>, key: string): void {
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
  holds(m: MutantName, cond: boolean): boolean {
    return cond || this.mutants.has(m);
  }

  bump(p: PartitionState): void {
    p.generation++;
    this.touch(p);
  }

  /** A change to the record's assignment that a write did not make (a retained copy expiring or lost). */
  touch(p: PartitionState): void {
    this.generation++;
    p.changedAt = this.generation;
    this.dirtyPartitions.add(p);
  }

  /** A deleted partition, for the changes read; kept in memory only (the oldest generation answered says so). */
  forget(id: string): void {
    this.generation++;
    this.removedAt.set(id, this.generation);
  }

  // ------------------------------------------------------------------ time

  /** Steps the simulation by ms simulated milliseconds, in ticks of config.tickMs. */
  advance(ms: number): void {
    let left = ms;
    while (left > 0) {
      const dt = Math.min(this.config.tickMs, left);
      left -= dt;
      this.now += dt;
      replication.tick(this, dt);
    }
  }

  // ------------------------------------------------------------------ faults and test controls (faults.ts)

  fault(f: Fault): string {
    return faults.fault(this, f);
  }

  joinNode(id: string, capacity = 1, zone = 'z1'): Node {
    return faults.joinNode(this, id, capacity, zone);
  }

  /** Marks a node as draining (add-learner then refuses it with node_draining) or clears the mark. */
  setDraining(id: string, draining: boolean, reason: string | null = null): Node {
    return faults.setDraining(this, id, draining, reason);
  }

  publish(partitionId: string, count: number): { firstOffset: number; nextOffset: number } {
    return faults.publish(this, partitionId, count);
  }

  setRate(partitionId: string, publishRate: number): PartitionView {
    return faults.setRate(this, partitionId, publishRate);
  }

  /** Test control: a new partition on live nodes, owner first; the caller checked the id is new. */
  createPartition(id: string, kind: 'queue' | 'stream', replicas: string[], settings: PartitionSettings = {}): PartitionView {
    return faults.createPartition(this, id, kind, replicas, settings);
  }

  /**
   * Test control: forgets a partition entirely (its transfer slots, retained copies and pending injected
   * refusals with it), so a test leaves the topology as it found it. Events already emitted stay in the feed.
   */
  deletePartition(id: string): void {
    faults.deletePartition(this, id);
  }

  /** Why the node cannot be deleted: every partition that still holds it, and how. Empty: it can be. */
  nodeInUse(id: string): string[] {
    return faults.nodeInUse(this, id);
  }

  /** Test control: removes a node nothing holds (see nodeInUse; the caller checked). */
  deleteNode(id: string): void {
    faults.deleteNode(this, id);
  }

  // ------------------------------------------------------------------ guarded writes (writes.ts)

  write<N extends GuardedWriteName>(partitionId: string, name: N, req: GuardedWriteRequest<N>): WriteReply {
    return writes.write(this, partitionId, name, req);
  }

  // ------------------------------------------------------------------ reads (views.ts)

  node(id: string): NodeState {
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

  partitionRecord(p: PartitionState): Partition {
    return views.partitionRecord(this, p);
  }

  topology(): Topology {
    return views.topology(this);
  }

  nodesView(): NodesView {
    return views.nodesView(this);
  }

  /** The partition records after `after` in id order, at most `limit` (GET /v1/topology/page). */
  topologyPage(after: string | undefined, limit: number): TopologyPage {
    return views.topologyPage(this, after, limit);
  }

  /** What changed after generation `after`, or null when this process cannot say (see changesFrom). */
  changesSince(after: number): TopologyChanges | null {
    if (after < this.changesFrom || after > this.generation) return null;
    const removed = [...this.removedAt].filter(([, at]) => at > after).map(([id]) => id);
    return views.changesSince(this, after, removed);
  }

  progress(id: string): Progress {
    return views.progress(this, id);
  }

  partitionView(id: string): PartitionView {
    return views.partitionView(this, id);
  }

  syncBudget(): SyncBudget {
    return views.syncBudget(this);
  }

  /** A compact picture of one partition for breach reports. */
  stateOf(p: PartitionState): Record<string, unknown> {
    return views.stateOf(this, p);
  }

  /** Eligible holders' storage check, shared with the invariant checker. */
  storageOf(node: string): string | undefined {
    return this.nodes.get(node)?.storageInstance;
  }
}

function breachKey(b: Breach): string {
  const key = b.state.key;
  return typeof key === 'string' ? key : `${b.invariant}:${b.partition}:${b.offset ?? ''}:${b.at}`;
}
