/**
 * The planner's working copy of a topology: nodes and partitions indexed by number, each node's raw load kept
 * up to date as moves are applied, so a score is a few multiplications and a move touches two nodes, never a
 * rescan of every partition. One class over 400 lines: the flat partition layout, the reading of records into it
 * (whole, or again where records changed, for a `KeptReading`) and the moves that update it belong together, and
 * split apart every access would go through a second object.
 */
import type { Node, Partition, Topology } from '../cluster/contract';
import type { KeptReading } from './kept';
import { lostReason } from './lost';
import { zoneFactors } from './zones';
import type { Dimension, GuardDimension, InFlightMove, NodeScore, OperatorHold, PlanInput, PlannerConfig, ScoreWeights } from './types';

export interface NodeState {
  index: number;
  id: string;
  zone: string;
  cap: number;
  /**
   * Capacity as each share counts it, `cap` scaled by the zone rule (zones.ts): copies, history and publishes go by
   * the node's share of its zone's copies; followed copies by that less its owner roles' share; traffic by its
   * publishes' and deliveries' shares together. Owner roles and deliveries go by `cap`: the zone rule holds copies,
   * not which copy owns. All equal `cap` where the zone rule binds nothing.
   */
  capCopy: number;
  capFollowed: number;
  capTraffic: number;
  /** The least of the four: what bounds one copy's change to the node's score. */
  capMin: number;
  live: boolean;
  draining: boolean;
  /** Holds a suspended (restarted, rejoining) replica: recovery transfers to it come first, so it receives nothing. */
  suspended: boolean;
  /** Excluded by an operator, in words ("excluded by alice: ..."): no copy or ownership moves onto or off it. */
  excluded: string | null;
  owned: number;
  followed: number;
  /** Sum of h / (h + k) over the partitions it holds. */
  hist: number;
  traffic: number;
  /** The deliveries its owner roles serve: the part of `traffic` that follows the owner role, not the copy. */
  deliveries: number;
  /** History bytes of the copies it holds (the unit of the sync term). */
  bytes: number;
  /** Bytes still to copy of transfers to or from it. */
  sync: number;
  /** Transfers in flight to it (the broker's sync budget counts them on the receiving node). */
  inbound: number;
  /** Partitions it holds a copy of, any role, in no particular order (an array: 100,000 Set entries cost more than a tick). */
  parts: number[];
}

/** A follower copy lost for good (see repair.ts), with its partition's counted live copies and replication factor. */
export interface LostCopy {
  p: number;
  node: number;
  why: string;
  live: number;
  rf: number;
}

function num(v: number | undefined): number {
  return v !== undefined && Number.isFinite(v) && v > 0 ? v : 0;
}

/** An operator's pin or exclusion in words, as reasons name it. */
function held(what: 'pinned' | 'excluded', hold: OperatorHold | undefined): string | null {
  return hold === undefined ? null : `${what} by ${hold.by}: ${hold.reason}`;
}

/** Why a stream is never touched: "Queues come first. Streams need their own seal and selection path." */
const STREAM = 'a stream (streams do not move yet)';
const RECOVERY = 'a recovery is pending';

/** The first place in ascending `list` whose value is not below x. */
function placeOf(list: readonly number[], x: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Inserts x into ascending `list` (at its end when it is the largest, as a read in partition order adds them). */
function insertSorted(list: number[], x: number): void {
  if (list.length === 0 || list[list.length - 1]! < x) list.push(x);
  else list.splice(placeOf(list, x), 0, x);
}

/** Removes x from ascending `list`, keeping the order. */
function removeSorted(list: number[], x: number): void {
  const at = placeOf(list, x);
  if (list[at] === x) list.splice(at, 1);
}

/** The largest value, or 0. */
function largest(xs: Float64Array): number {
  let most = 0;
  for (const x of xs) if (x > most) most = x;
  return most;
}

/** No partition named: a record read again keeps its place in `partIndex`. */
const NAMED_NONE: ReadonlySet<string> = new Set();

/** Role of a copy slot: a counted follower (admitted, caught up, not suspended: a handoff target) or any other copy. */
const OTHER = 0;
const FOLLOWER = 1;

/**
 * Partitions are numbered and their fields kept in flat typed arrays, not one object (and two arrays) each:
 * building the state from 100,000 partition records then allocates a few buffers, and garbage collection, which
 * used to take most of a tick, has next to nothing to do.
 */
export class ClusterState {
  readonly nodes: NodeState[] = [];
  readonly nodeIndex = new Map<string, number>();
  /** Number of partitions, in topology order. */
  readonly partCount: number;
  /**
   * Partition id -> index, only for the ids the input names (moves in flight, cooldowns): an index of every id
   * would cost more than the tick itself on a large cluster.
   */
  readonly partIndex = new Map<string, number>();
  /** Per partition: its owner's node index (-1 when the topology does not list it). */
  readonly owner: Int32Array;
  /** Per partition: history bytes, h / (h + k), publish and delivery rates. */
  readonly bytes: Float64Array;
  readonly hw: Float64Array;
  readonly pub: Float64Array;
  readonly del: Float64Array;
  /** Per partition: its replication factor. */
  private readonly rf: Uint8Array;
  /** Per partition: the fewest bytes a copy of it costs anywhere: its history, or less at a retained copy. */
  readonly cheapest: Float64Array;
  /** Per partition: why it is not touched now (a change in flight, a stream, ...), or null. */
  readonly busy: (string | null)[];
  /** Partitions with an owner handoff in flight (already counted as done). */
  readonly handingOff: number[] = [];
  /**
   * Every node holding a copy of partition p (owner, followers, learners, leaving) is in slots
   * p * stride .. p * stride + copyCount[p] - 1 of copyNode, with its role (FOLLOWER or OTHER) in copyRole.
   * Room for three copies and one arriving; a partition with more widens every row (a pass over the records to
   * size them first would cost a tenth of the state's time).
   */
  stride = 4;
  readonly copyCount: Uint8Array;
  copyNode: Int32Array;
  copyRole: Uint8Array;
  /** Partition -> (node index -> bytes a learner there still copies), for retained copies on known nodes. */
  private readonly retained: Map<number, Map<number, number>>;
  /** Partition -> nodes holding a suspended (rejoining) copy of it: what sets `NodeState.suspended`. */
  private readonly rejoins: Map<number, number[]>;
  /** Per dimension: weight / (cluster total / capacity of the nodes that stay), 0 when the total is 0. */
  readonly w: ScoreWeights;
  readonly wSum: number;
  /** Mean steady score (sync excluded) over the nodes that stay: 1 when every weighted dimension has load. */
  readonly mean: number;
  readonly activeCap: number;
  /** Per dimension of the bands: the cluster's total over the capacity of the nodes that stay (a node's share per capacity). */
  readonly perCap: Record<Dimension | GuardDimension, number>;
  /** The largest partition's history bytes, publish rate and delivery rate: the least width of a band (bands.ts). */
  maxBytes = 0;
  maxPub = 0;
  maxDel = 0;
  /** Node index -> partitions it holds a retained copy of. */
  readonly retainedOn: Map<number, number[]>;
  /** Partitions with a recovery pending, in topology order. */
  readonly recoveries: { id: string; reason: string }[];
  /** Partition index -> its operator's pin in words ("pinned by alice: ..."): never moved nor handed off. */
  readonly pins = new Map<number, string>();
  /** Follower copies lost for good, in topology order: what repair replaces. */
  readonly lost: LostCopy[];
  private ids: readonly { id: string }[];
  private readonly nodeRecords: readonly Node[];
  /** Broker clock of the topology (what Node.downSince is on) and the replace timeout; repair is off at 0. */
  private readonly brokerNow: number;
  private readonly replaceAfterMs: number;

  /**
   * With `kept`, the partition records are not read here: the kept reading of the same topology is copied (what a
   * plan changes) or shared (what it only reads), so a state made so is good until the next one is made from it.
   */
  constructor(input: PlanInput, config: PlannerConfig, draining: ReadonlySet<string>, kept?: KeptReading) {
    const t: Topology = input.topology;
    for (const n of t.nodes) {
      const index = this.nodes.length;
      this.nodeIndex.set(n.id, index);
      this.nodes.push({
        index,
        id: n.id,
        zone: n.zone,
        cap: n.capacity,
        capCopy: n.capacity,
        capFollowed: n.capacity,
        capTraffic: n.capacity,
        capMin: n.capacity,
        live: n.live,
        draining: n.draining || draining.has(n.id),
        suspended: false,
        excluded: held('excluded', input.excluded?.[n.id]),
        owned: 0,
        followed: 0,
        hist: 0,
        traffic: 0,
        deliveries: 0,
        bytes: 0,
        sync: 0,
        inbound: 0,
        parts: [],
      });
    }
    this.nodeRecords = t.nodes;
    this.brokerNow = t.now;
    // Only when a node is down can a copy be lost: otherwise reading a partition costs nothing more.
    this.replaceAfterMs = t.nodes.some((n) => !n.live) ? config.replaceAfterMs : 0;
    const k = config.historyHalfBytes;
    const named = new Set<string>([...Object.keys(input.cooldowns.partitions), ...Object.keys(input.cooldowns.moves ?? {})]);
    for (const m of input.inFlight) named.add(m.partition);
    for (const id of Object.keys(input.pinned ?? {})) named.add(id);
    const count = t.partitions.length;
    this.partCount = count;
    this.ids = t.partitions;
    const base = kept?.baseFor(t, config) ?? null;
    // What a plan changes is copied from the kept reading; what it only reads is shared.
    this.owner = base ? base.owner.slice() : new Int32Array(count);
    this.bytes = base ? base.bytes : new Float64Array(count);
    this.hw = base ? base.hw : new Float64Array(count);
    this.pub = base ? base.pub : new Float64Array(count);
    this.del = base ? base.del : new Float64Array(count);
    this.cheapest = base ? base.cheapest : new Float64Array(count);
    this.rf = base ? base.rf : new Uint8Array(count);
    this.busy = base ? base.busy.slice() : new Array<string | null>(count).fill(null);
    this.copyCount = base ? base.copyCount.slice() : new Uint8Array(count);
    this.stride = base ? base.stride : this.stride;
    this.copyNode = base ? base.copyNode.slice() : new Int32Array(count * this.stride);
    this.copyRole = base ? base.copyRole.slice() : new Uint8Array(count * this.stride);
    this.retained = base ? base.retained : new Map();
    this.rejoins = base ? base.rejoins : new Map();
    this.retainedOn = base ? base.retainedOn : new Map();
    this.recoveries = base ? base.recoveries : [];
    this.lost = base ? base.lost : [];
    if (base === null) this.readPartitions(t.partitions, k, named);
    else this.copyReading(base, kept!, named);
    for (const m of input.inFlight) this.applyInFlight(m);
    for (const [id, pin] of Object.entries(input.pinned ?? {})) {
      const p = this.partIndex.get(id);
      if (p !== undefined) this.pins.set(p, held('pinned', pin)!);
    }

    let activeCap = 0;
    const total = { owned: 0, followed: 0, hist: 0, traffic: 0, deliveries: 0, bytes: 0 };
    for (const n of this.nodes) {
      if (n.live && !n.draining) activeCap += n.cap;
      if (!n.live) continue;
      total.owned += n.owned;
      total.followed += n.followed;
      total.hist += n.hist;
      total.traffic += n.traffic;
      total.deliveries += n.deliveries;
      total.bytes += n.bytes;
    }
    // A copy lost for good is load the live nodes take on once it is replaced: counted now, so a plan's repairs
    // leave the mean where it was instead of raising every live node above it.
    for (const { p } of this.lost) {
      total.followed += 1;
      total.hist += this.hw[p]!;
      total.traffic += this.copyTraffic(p, false);
      total.bytes += this.bytes[p]!;
    }
    this.activeCap = activeCap;
    const perCap = (x: number): number => (activeCap > 0 ? x / activeCap : 0);
    this.perCap = {
      replicas: perCap(total.owned + total.followed),
      owned: perCap(total.owned),
      disk: perCap(total.bytes),
      traffic: perCap(total.traffic),
      publishes: perCap(total.traffic - total.deliveries),
      deliveries: perCap(total.deliveries),
    };
    this.zoneShares();
    const per = (x: number, weight: number): number => (x > 0 && activeCap > 0 ? (weight * activeCap) / x : 0);
    const cw = config.weights;
    this.w = {
      owned: per(total.owned, cw.owned),
      followed: per(total.followed, cw.followed),
      history: per(total.hist, cw.history),
      traffic: per(total.traffic, cw.traffic),
      sync: per(total.bytes, cw.sync),
    };
    // The steady weights sum to 1 after this, so the mean is 1 when every dimension has load; the sync term rides on top.
    this.wSum = cw.owned + cw.followed + cw.history + cw.traffic || 1;
    const present = (x: number, weight: number): number => (x > 0 ? weight : 0);
    this.mean =
      (present(total.owned, cw.owned) +
        present(total.followed, cw.followed) +
        present(total.hist, cw.history) +
        present(total.traffic, cw.traffic)) /
      this.wSum;
  }

  /**
   * The zone rule's shares again, from the copies as they lie now (they bound what each zone must and may hold): a
   * settling round plans on the shares a fresh read of what the plan leaves gives, as the loop does tick by tick.
   */
  rezone(): void {
    for (const n of this.nodes) n.capCopy = n.capFollowed = n.capTraffic = n.capMin = n.cap;
    this.zoneShares();
  }

  /** Each node's capacity per share, scaled by its zone's share of the copies (zones.ts). */
  private zoneShares(): void {
    const nodes = this.nodes;
    const factor = zoneFactors({
      zone: nodes.map((n) => n.zone),
      cap: nodes.map((n) => n.cap),
      stays: nodes.map((n) => this.stays(n)),
      rf: this.rf,
      copyCount: this.copyCount,
      copyNode: this.copyNode,
      stride: this.stride,
      total: this.perCap.replicas * this.activeCap,
    });
    const { replicas, owned, followed, publishes, deliveries, traffic } = { ...this.perCap, followed: this.perCap.replicas - this.perCap.owned };
    for (const n of nodes) {
      const f = factor[n.index]!;
      if (f === 1) continue;
      n.capCopy = n.cap * f;
      // A zone the rule keeps from holding copies for its owner roles' share (more zones than copies, one zone holding
      // most of the capacity) still has a followed share: a tenth of its copies'.
      n.capFollowed = followed > 0 ? (n.cap * Math.max(replicas * f - owned, 0.1 * replicas * f)) / followed : n.cap;
      n.capTraffic = traffic > 0 ? (n.cap * (publishes * f + deliveries)) / traffic : n.cap;
      n.capMin = Math.min(n.cap, n.capCopy, n.capFollowed, n.capTraffic);
    }
  }

  /**
   * The partition records into the flat arrays and their copies' load onto their nodes. A method of its own: V8
   * optimizes it once and reuses that code every tick, where a loop inside the constructor is compiled anew each time.
   */
  private readPartitions(records: readonly Partition[], k: number, named: ReadonlySet<string>): void {
    for (let index = 0; index < records.length; index++) this.readPartition(records[index]!, index, k, named);
  }

  /** Node loads and the named partitions' places from `base`, a kept reading of the same records. */
  private copyReading(base: ClusterState, kept: KeptReading, named: ReadonlySet<string>): void {
    this.maxBytes = base.maxBytes;
    this.maxPub = base.maxPub;
    this.maxDel = base.maxDel;
    for (const n of this.nodes) {
      const { owned, followed, hist, traffic, deliveries, bytes, suspended, parts } = base.nodes[n.index]!;
      Object.assign(n, { owned, followed, hist, traffic, deliveries, bytes, suspended, parts: parts.slice() });
    }
    for (const id of named) {
      const p = kept.indexOf(id);
      if (p !== undefined) this.partIndex.set(id, p);
    }
  }

  /**
   * Reads again the records at `changed` of `records` (the same ids in the same places as those read before), and
   * at `figures` only their advisory figures (their copies where they were): how a `KeptReading` follows a topology.
   * Each node's parts stay in partition order and the loads of the nodes the records touch are summed again in that
   * order, so the state is, to the bit, the one a fresh read makes.
   */
  reread(records: readonly Partition[], changed: readonly number[], k: number, figures: readonly number[] = []): void {
    const touched = new Set<number>();
    let recoveries = false;
    let largestGone = false;
    // Records whose figures alone moved keep their copies where they are: only their nodes' loads are summed again.
    for (const p of figures) {
      largestGone ||= this.holdsLargest(p);
      for (let i = p * this.stride, e = i + this.copyCount[p]!; i < e; i++) touched.add(this.copyNode[i]!);
    }
    for (const p of changed) {
      for (let i = p * this.stride, e = i + this.copyCount[p]!; i < e; i++) {
        removeSorted(this.nodes[this.copyNode[i]!]!.parts, p);
        touched.add(this.copyNode[i]!);
      }
      for (const n of this.retained.get(p)?.keys() ?? []) {
        const on = this.retainedOn.get(n)!;
        removeSorted(on, p);
        if (on.length === 0) this.retainedOn.delete(n);
      }
      this.retained.delete(p);
      this.rejoins.delete(p);
      recoveries ||= this.busy[p] === RECOVERY;
      largestGone ||= this.holdsLargest(p);
      this.copyCount[p] = 0;
      this.busy[p] = null;
    }
    this.ids = records;
    for (const p of figures) this.readFigures(records[p]!, p, k);
    for (const p of changed) {
      this.readPartition(records[p]!, p, k, NAMED_NONE, touched);
      recoveries ||= this.busy[p] === RECOVERY;
    }
    for (const n of touched) this.sumLoad(this.nodes[n]!);
    if (largestGone) {
      this.maxBytes = largest(this.bytes);
      this.maxPub = largest(this.pub);
      this.maxDel = largest(this.del);
    }
    if (!recoveries) return;
    this.recoveries.length = 0;
    for (let p = 0; p < this.partCount; p++) if (this.busy[p] === RECOVERY) this.recoveries.push({ id: records[p]!.id, reason: records[p]!.pendingRecovery!.reason });
  }

  /** Whether p's record held a largest figure: reading it again may leave the largest lower, so all are looked at again. */
  private holdsLargest(p: number): boolean {
    return this.bytes[p]! >= this.maxBytes || this.pub[p]! >= this.maxPub || this.del[p]! >= this.maxDel;
  }

  /** A node's load summed again from its parts, in the order a fresh read adds them. */
  private sumLoad(ns: NodeState): void {
    ns.owned = ns.followed = ns.hist = ns.traffic = ns.deliveries = ns.bytes = 0;
    ns.suspended = false;
    for (const p of ns.parts) {
      this.addSums(p, ns, this.owner[p] === ns.index, 1);
      if (this.rejoins.get(p)?.includes(ns.index) === true) ns.suspended = true;
    }
  }

  private readPartition(p: Partition, index: number, k: number, named: ReadonlySet<string>, touched: Set<number> | null = null): void {
    if (named.size > 0 && named.has(p.id)) this.partIndex.set(p.id, index);
    this.rf[index] = p.replicationFactor;
    this.readFigures(p, index, k);
    let suspended: string[] | null = null;
    for (const h of p.history) if (h.suspended) (suspended ??= []).push(h.node);
    this.owner[index] = this.addCopy(index, p.owner, suspended, false);
    for (const id of p.followers) this.addCopy(index, id, suspended, true);
    for (const id of p.learners) this.addCopy(index, id, suspended, false);
    if (p.leaving !== null) this.addCopy(index, p.leaving, suspended, false);
    for (const rc of p.retainedCopies) {
      const n = this.nodeIndex.get(rc.node);
      if (n === undefined) continue;
      let at = this.retained.get(index);
      if (at === undefined) this.retained.set(index, (at = new Map()));
      at.set(n, num(rc.bytesToCatchUp));
      this.cheapest[index] = Math.min(this.cheapest[index]!, num(rc.bytesToCatchUp));
      const on = this.retainedOn.get(n);
      if (on === undefined) this.retainedOn.set(n, [index]);
      else insertSorted(on, index);
    }
    let busy = this.busy[index]!;
    if (p.pendingRecovery !== null) {
      busy = RECOVERY;
      this.recoveries.push({ id: p.id, reason: p.pendingRecovery.reason });
    } else if (p.kind === 'stream') busy = STREAM;
    else if (p.learners.length > 0) busy = `learner ${p.learners.join(', ')} catching up`;
    else if (p.leaving !== null) busy = `leaving replica ${p.leaving} not yet removed`;
    else if (p.admission === 'closed') busy = 'admission closed for a handoff';
    else if (suspended !== null) {
      // A suspended copy on a down node cannot rejoin until its node returns: it holds nothing up meanwhile.
      const rejoining = suspended.filter((id) => {
        const n = this.nodeIndex.get(id);
        return n !== undefined && this.nodes[n]!.live;
      });
      if (rejoining.length > 0) busy = `${rejoining.join(', ')} rejoining (suspended)`;
    }
    this.busy[index] = busy;
    if (this.replaceAfterMs > 0 && p.kind === 'queue') this.findLost(p, index);
    const o = this.owner[index]!;
    for (let i = index * this.stride, e = i + this.copyCount[index]!; i < e; i++) {
      const n = this.copyNode[i]!;
      if (touched === null) this.addLoad(index, n, n === o, 1);
      else {
        // Summed again once every changed record is read (`reread`).
        insertSorted(this.nodes[n]!.parts, index);
        touched.add(n);
      }
    }
  }

  /** A record's advisory figures: its history's bytes and weight, its rates, and the least a new copy costs before retained copies. */
  private readFigures(p: Partition, index: number, k: number): void {
    const bytes = num(p.historyBytes);
    this.bytes[index] = bytes;
    this.hw[index] = bytes / (bytes + k);
    this.pub[index] = num(p.publishRate);
    this.del[index] = num(p.deliveryRate);
    this.cheapest[index] = bytes;
    if (bytes > this.maxBytes) this.maxBytes = bytes;
    if (this.pub[index]! > this.maxPub) this.maxPub = this.pub[index]!;
    if (this.del[index]! > this.maxDel) this.maxDel = this.del[index]!;
  }

  private findLost(p: Partition, index: number): void {
    let live = -1;
    for (const id of p.followers) {
      const n = this.nodeIndex.get(id);
      if (n === undefined || this.nodes[n]!.live) continue;
      const why = lostReason(this.nodeRecords[n]!, p.history.find((h) => h.node === id), this.brokerNow, this.replaceAfterMs);
      if (why === null) continue;
      if (live < 0) live = this.liveCopies(index);
      this.lost.push({ p: index, node: n, why, live, rf: p.replicationFactor });
    }
  }

  /** p's copies that count now: its owner and counted followers on live nodes. */
  liveCopies(p: number): number {
    const o = this.owner[p]!;
    return (o >= 0 && this.nodes[o]!.live ? 1 : 0) + this.followers(p).filter((n) => this.nodes[n]!.live).length;
  }

  /** Adds node `id`'s copy of p unless it is there already; its node index, or -1 for a node the topology does not list. */
  private addCopy(p: number, id: string, suspended: string[] | null, follower: boolean): number {
    const n = this.nodeIndex.get(id);
    if (n === undefined) {
      this.busy[p] = `a copy on ${id}, a node the topology does not list`;
      return -1;
    }
    if (this.holds(p, n)) return n;
    const rejoining = suspended?.includes(id) === true;
    if (rejoining) {
      this.nodes[n]!.suspended = true;
      const at = this.rejoins.get(p);
      if (at === undefined) this.rejoins.set(p, [n]);
      else at.push(n);
    }
    this.pushCopy(p, n, follower && !rejoining ? FOLLOWER : OTHER);
    return n;
  }

  private pushCopy(p: number, n: number, role: number): void {
    if (this.copyCount[p] === this.stride) this.widen(this.stride + 2);
    const i = p * this.stride + this.copyCount[p]!;
    this.copyNode[i] = n;
    this.copyRole[i] = role;
    this.copyCount[p]!++;
  }

  private widen(stride: number): void {
    const node = new Int32Array(this.partCount * stride);
    const role = new Uint8Array(this.partCount * stride);
    for (let p = 0; p < this.partCount; p++) {
      const from = p * this.stride;
      node.set(this.copyNode.subarray(from, from + this.copyCount[p]!), p * stride);
      role.set(this.copyRole.subarray(from, from + this.copyCount[p]!), p * stride);
    }
    this.stride = stride;
    this.copyNode = node;
    this.copyRole = role;
  }

  /** The slot of node n among p's copies, or -1. */
  private slot(p: number, n: number): number {
    for (let i = p * this.stride, e = i + this.copyCount[p]!; i < e; i++) if (this.copyNode[i] === n) return i;
    return -1;
  }

  /** p is a stream, whose copies never move yet (and no recovery is pending on it). */
  isStream(p: number): boolean {
    return this.busy[p] === STREAM;
  }

  id(p: number): string {
    return this.ids[p]!.id;
  }

  /** Node n holds a copy of p, any role. */
  holds(p: number, n: number): boolean {
    return this.slot(p, n) >= 0;
  }

  /** Node n is a counted follower of p. */
  isFollower(p: number, n: number): boolean {
    const i = this.slot(p, n);
    return i >= 0 && this.copyRole[i] === FOLLOWER;
  }

  /** p's counted followers, in order. */
  followers(p: number): number[] {
    const out: number[] = [];
    out.length = this.followersInto(p, out);
    return out;
  }

  /**
   * p's counted followers written into `out` from its start, and how many: a search over every partition reuses one
   * array (an array per partition was 15 MB of garbage a tick at 100,000 partitions). Not emptied first: emptying an
   * array drops its storage, and the next write allocates it again.
   */
  followersInto(p: number, out: number[]): number {
    let k = 0;
    for (let i = p * this.stride, e = i + this.copyCount[p]!; i < e; i++) if (this.copyRole[i] === FOLLOWER) out[k++] = this.copyNode[i]!;
    return k;
  }

  /** Every node holding a copy of p. */
  copies(p: number): number[] {
    return Array.from(this.copyNode.subarray(p * this.stride, p * this.stride + this.copyCount[p]!));
  }

  /** Node index -> bytes a learner there still copies, for p's retained copies on known nodes. */
  retainedAt(p: number): ReadonlyMap<number, number> | undefined {
    return this.retained.get(p);
  }

  /** Bytes a learner on node n copies: after the retained copy's durable offset when it holds one. */
  bytesTo(p: number, n: number): number {
    return this.retained.get(p)?.get(n) ?? this.bytes[p]!;
  }

  /** Traffic a copy carries: the owner serves publishes and deliveries, a follower only replicates publishes. */
  copyTraffic(p: number, owner: boolean): number {
    return owner ? this.pub[p]! + this.del[p]! : this.pub[p]!;
  }

  /** Adds (sign 1) or removes (sign -1) the sums of p's copy to node ns's load, its parts left as they are. */
  private addSums(p: number, ns: NodeState, owner: boolean, sign: 1 | -1): void {
    if (owner) ns.owned += sign;
    else ns.followed += sign;
    ns.hist += sign * this.hw[p]!;
    ns.traffic += sign * this.copyTraffic(p, owner);
    if (owner) ns.deliveries += sign * this.del[p]!;
    ns.bytes += sign * this.bytes[p]!;
  }

  /** Adds (sign 1) or removes (sign -1) the load of p's copy on node n. */
  addLoad(p: number, n: number, owner: boolean, sign: 1 | -1): void {
    const ns = this.nodes[n]!;
    this.addSums(p, ns, owner, sign);
    if (sign === 1) ns.parts.push(p);
    else {
      const i = ns.parts.indexOf(p);
      ns.parts[i] = ns.parts[ns.parts.length - 1]!;
      ns.parts.pop();
    }
  }

  /** A move in flight counts as done for the load (arriving at `to`, gone from `from`) plus its bytes as sync. */
  private applyInFlight(m: InFlightMove): void {
    const p = this.partIndex.get(m.partition);
    const to = this.nodeIndex.get(m.to);
    const from = m.from === null ? undefined : this.nodeIndex.get(m.from);
    if (p === undefined || to === undefined) return;
    this.busy[p] ??= `a ${m.op.replace('_', ' ')} in flight`;
    if (m.op === 'owner_handoff') {
      this.handingOff.push(p);
      if (from !== undefined && this.owner[p] === from && this.holds(p, to)) this.handoff(p, from, to);
      return;
    }
    const gone = from === undefined || from === this.owner[p] ? -1 : this.slot(p, from);
    if (gone >= 0) {
      this.addLoad(p, from!, false, -1);
      const end = p * this.stride + this.copyCount[p]! - 1;
      this.copyNode.copyWithin(gone, gone + 1, end + 1);
      this.copyRole.copyWithin(gone, gone + 1, end + 1);
      this.copyCount[p]!--;
    }
    if (!this.holds(p, to)) {
      this.addLoad(p, to, false, 1);
      this.pushCopy(p, to, OTHER);
    }
    this.addTransfer(to, from ?? null, num(m.bytesRemaining));
  }

  addTransfer(to: number, from: number | null, bytes: number): void {
    this.nodes[to]!.inbound++;
    this.nodes[to]!.sync += bytes;
    if (from !== null) this.nodes[from]!.sync += bytes;
  }

  /** Ends every transfer: the copies are in place, nothing is left to copy. */
  settleTransfers(): void {
    for (const n of this.nodes) {
      n.sync = 0;
      n.inbound = 0;
    }
  }

  followerMove(p: number, from: number, to: number): void {
    this.addLoad(p, from, false, -1);
    this.addLoad(p, to, false, 1);
    this.copyNode[this.slot(p, from)] = to;
  }

  /** A lost copy replaced: its slot and load go to `to`, which counts once the replacement is done. */
  replaceCopy(p: number, from: number, to: number): void {
    this.addLoad(p, from, false, -1);
    this.addLoad(p, to, false, 1);
    const i = this.slot(p, from);
    this.copyNode[i] = to;
    this.copyRole[i] = FOLLOWER;
  }

  handoff(p: number, from: number, to: number): void {
    this.addLoad(p, from, true, -1);
    this.addLoad(p, to, false, -1);
    this.addLoad(p, from, false, 1);
    this.addLoad(p, to, true, 1);
    this.owner[p] = to;
    // The two swap slots, each keeping its role: the former owner takes the new one's place among the followers.
    const a = this.slot(p, from);
    const b = this.slot(p, to);
    this.copyNode[a] = to;
    this.copyNode[b] = from;
  }

  /** Score without the transient sync term: what the node carries once its transfers are done. */
  steady(n: NodeState): number {
    const w = this.w;
    return ((w.owned * n.owned) / n.cap + (w.followed * n.followed) / n.capFollowed + (w.history * n.hist) / n.capCopy + (w.traffic * n.traffic) / n.capTraffic) / this.wSum;
  }

  syncTerm(n: NodeState): number {
    return (this.w.sync * n.sync) / (n.cap * this.wSum);
  }

  /** The largest change one follower copy makes to the steady score of a node of capacity `cap` (its `capMin`). */
  maxFollowerDelta(cap: number): number {
    if (this.maxFollowerLoad < 0) this.maxFollowerLoad = this.largestFollowerLoad();
    return this.maxFollowerLoad / (cap * this.wSum);
  }
  private maxFollowerLoad = -1;

  /** Its own method, so the code of maxFollowerDelta (called per source) is not thrown away each time this runs. */
  private largestFollowerLoad(): number {
    const w = this.w;
    let most = 0;
    for (let p = 0; p < this.partCount; p++) most = Math.max(most, w.followed + w.history * this.hw[p]! + w.traffic * this.copyTraffic(p, false));
    return most;
  }

  /** Change of a node's steady score when a copy of p in the given role arrives (sign 1) or leaves (-1). */
  copyDelta(p: number, n: NodeState, owner: boolean, sign: 1 | -1): number {
    const w = this.w;
    const v = (owner ? w.owned / n.cap : w.followed / n.capFollowed) + (w.history * this.hw[p]!) / n.capCopy + (w.traffic * this.copyTraffic(p, owner)) / n.capTraffic;
    return (sign * v) / this.wSum;
  }

  /** At least the change a follower copy of p makes to the steady score of any node whose `capMin` is `cap` or more. */
  followerBound(p: number, cap: number): number {
    const w = this.w;
    return (w.followed + w.history * this.hw[p]! + w.traffic * this.copyTraffic(p, false)) / (cap * this.wSum);
  }

  /**
   * How much node n's steady score would change were its owner roles at its share, the copies it holds the same:
   * what owner handoffs bring it (above 0) or take (below 0), at the average deliveries per owned partition.
   */
  ownerGap(n: NodeState): number {
    const { owned, deliveries } = this.perCap;
    if (owned <= 0) return 0;
    const w = this.w;
    return ((owned * n.cap - n.owned) * (w.owned / n.cap - w.followed / n.capFollowed + (w.traffic * deliveries) / owned / n.capTraffic)) / this.wSum;
  }

  /** Change of a node's steady score when it becomes p's owner (sign 1) or stops being it (-1), keeping its copy. */
  roleDelta(p: number, n: NodeState, sign: 1 | -1): number {
    const w = this.w;
    return (sign * (w.owned / n.cap - w.followed / n.capFollowed + (w.traffic * this.del[p]!) / n.capTraffic)) / this.wSum;
  }

  /** The nodes the mean is over: live and not draining. */
  stays(n: NodeState): boolean {
    return n.live && !n.draining;
  }

  /** Largest |steady score - mean| over the nodes that stay. */
  spread(): number {
    let s = 0;
    for (const n of this.nodes) if (this.stays(n)) s = Math.max(s, Math.abs(this.steady(n) - this.mean));
    return s;
  }

  /** Owned partitions per capacity relative to the mean (0 = average): what owner handoffs even out. */
  ownedDev(n: NodeState, meanOwned: number): number {
    return meanOwned > 0 ? n.owned / n.cap / meanOwned - 1 : 0;
  }

  meanOwned(): number {
    let owned = 0;
    for (const n of this.nodes) if (n.live) owned += n.owned;
    return this.activeCap > 0 ? owned / this.activeCap : 0;
  }

  scores(): Omit<NodeScore, 'bands'>[] {
    const w = this.w;
    const f = this.wSum;
    return this.nodes.map((n) => {
      const steady = this.steady(n);
      return {
        node: n.id,
        zone: n.zone,
        capacity: n.cap,
        live: n.live,
        draining: n.draining,
        owned: (w.owned * n.owned) / (n.cap * f),
        followed: (w.followed * n.followed) / (n.capFollowed * f),
        history: (w.history * n.hist) / (n.capCopy * f),
        traffic: (w.traffic * n.traffic) / (n.capTraffic * f),
        sync: this.syncTerm(n),
        total: steady + this.syncTerm(n),
      };
    });
  }
}
