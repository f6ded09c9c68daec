/**
 * The planner's working copy of a topology: nodes and partitions indexed by number, each node's raw load kept
 * up to date as moves are applied, so a score is a few multiplications and a move touches two nodes, never a
 * rescan of every partition.
 */
import type { Topology } from '../cluster/contract';
import type { InFlightMove, NodeScore, PlanInput, PlannerConfig } from './types';

export interface NodeState {
  index: number;
  id: string;
  zone: string;
  cap: number;
  live: boolean;
  draining: boolean;
  /** Holds a suspended (restarted, rejoining) replica: recovery transfers to it come first, so it receives nothing. */
  suspended: boolean;
  owned: number;
  followed: number;
  /** Sum of h / (h + k) over the partitions it holds. */
  hist: number;
  traffic: number;
  /** History bytes of the copies it holds (the unit of the sync term). */
  bytes: number;
  /** Bytes still to copy of transfers to or from it. */
  sync: number;
  /** Transfers in flight to it (the broker's sync budget counts them on the receiving node). */
  inbound: number;
  /** Partitions it holds a copy of, any role, in no particular order (an array: 100,000 Set entries cost more than a tick). */
  parts: number[];
}

export interface PartState {
  index: number;
  id: string;
  owner: number;
  /** Counted followers, admitted and caught up (suspended ones excluded): the handoff targets. */
  followers: number[];
  /** Every node holding a copy: owner, followers, learners, leaving. */
  copies: number[];
  bytes: number;
  /** h / (h + k). */
  hw: number;
  pub: number;
  del: number;
  /** Why the partition is not touched now (a change in flight, a stream, ...), or null. */
  busy: string | null;
  /** Node index -> bytes a learner there still copies, for retained copies on known nodes (null: none). */
  retained: Map<number, number> | null;  /** The fewest bytes a copy of it costs anywhere: its history, or less at a retained copy. */
  cheapest: number;
}

export interface Weights {
  owned: number;
  followed: number;
  history: number;
  traffic: number;
  sync: number;
}

/** Traffic a copy carries: the owner serves publishes and deliveries, a follower only replicates publishes. */
export function copyTraffic(p: PartState, owner: boolean): number {
  return owner ? p.pub + p.del : p.pub;
}

function num(v: number | undefined): number {
  return v !== undefined && Number.isFinite(v) && v > 0 ? v : 0;
}

export class ClusterState {
  readonly nodes: NodeState[] = [];
  readonly parts: PartState[] = [];
  readonly nodeIndex = new Map<string, number>();
  /**
   * Partition id -> index, only for the ids the input names (moves in flight, cooldowns): an index of every id
   * would cost more than the tick itself on a large cluster.
   */
  readonly partIndex = new Map<string, number>();
  /** Per dimension: weight / (cluster total / capacity of the nodes that stay), 0 when the total is 0. */
  readonly w: Weights;
  readonly wSum: number;
  /** Mean steady score (sync excluded) over the nodes that stay: 1 when every weighted dimension has load. */
  readonly mean: number;
  readonly activeCap: number;
  /** Node index -> partitions it holds a retained copy of. */
  readonly retainedOn = new Map<number, number[]>();
  /** Partitions with a recovery pending, in topology order. */
  readonly recoveries: { id: string; reason: string }[] = [];

  constructor(input: PlanInput, config: PlannerConfig, draining: ReadonlySet<string>) {
    const t: Topology = input.topology;
    for (const n of t.nodes) {
      const index = this.nodes.length;
      this.nodeIndex.set(n.id, index);
      this.nodes.push({
        index,
        id: n.id,
        zone: n.zone,
        cap: n.capacity,
        live: n.live,
        draining: n.draining || draining.has(n.id),
        suspended: false,
        owned: 0,
        followed: 0,
        hist: 0,
        traffic: 0,
        bytes: 0,
        sync: 0,
        inbound: 0,
        parts: [],
      });
    }
    const k = config.historyHalfBytes;
    const named = new Set<string>(Object.keys(input.cooldowns.partitions));
    for (const m of input.inFlight) named.add(m.partition);
    for (const p of t.partitions) {
      const index = this.parts.length;
      if (named.size > 0 && named.has(p.id)) this.partIndex.set(p.id, index);
      const bytes = num(p.historyBytes);
      const ps: PartState = {
        index,
        id: p.id,
        owner: this.nodeIndex.get(p.owner) ?? -1,
        followers: [],
        copies: [],
        bytes,
        hw: bytes / (bytes + k),
        pub: num(p.publishRate),
        del: num(p.deliveryRate),
        busy: null,
        retained: null,
        cheapest: bytes,
      };
      this.parts.push(ps);
      let suspended: string[] | null = null;
      for (const h of p.history) if (h.suspended) (suspended ??= []).push(h.node);
      this.addCopy(ps, p.owner, suspended, false);
      for (const id of p.followers) this.addCopy(ps, id, suspended, true);
      for (const id of p.learners) this.addCopy(ps, id, suspended, false);
      if (p.leaving !== null) this.addCopy(ps, p.leaving, suspended, false);
      for (const rc of p.retainedCopies) {
        const n = this.nodeIndex.get(rc.node);
        if (n === undefined) continue;
        (ps.retained ??= new Map()).set(n, num(rc.bytesToCatchUp));
        ps.cheapest = Math.min(ps.cheapest, num(rc.bytesToCatchUp));
        const on = this.retainedOn.get(n);
        if (on === undefined) this.retainedOn.set(n, [index]);
        else on.push(index);
      }
      if (p.pendingRecovery !== null) {
        ps.busy = 'a recovery is pending';
        this.recoveries.push({ id: p.id, reason: p.pendingRecovery.reason });
      } else if (p.kind === 'stream') ps.busy = 'a stream (streams do not move yet)';
      else if (p.learners.length > 0) ps.busy = `learner ${p.learners.join(', ')} catching up`;
      else if (p.leaving !== null) ps.busy = `leaving replica ${p.leaving} not yet removed`;
      else if (p.admission === 'closed') ps.busy = 'admission closed for a handoff';
      else if (suspended !== null) ps.busy = `${suspended.join(', ')} rejoining (suspended)`;
      for (const n of ps.copies) this.addLoad(ps, n, n === ps.owner, 1);
    }
    for (const m of input.inFlight) this.applyInFlight(m);

    let activeCap = 0;
    const total = { owned: 0, followed: 0, hist: 0, traffic: 0, bytes: 0 };
    for (const n of this.nodes) {
      if (n.live && !n.draining) activeCap += n.cap;
      if (!n.live) continue;
      total.owned += n.owned;
      total.followed += n.followed;
      total.hist += n.hist;
      total.traffic += n.traffic;
      total.bytes += n.bytes;
    }
    this.activeCap = activeCap;
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

  private addCopy(p: PartState, id: string, suspended: string[] | null, follower: boolean): void {
    const n = this.nodeIndex.get(id);
    if (n === undefined) {
      p.busy = `a copy on ${id}, a node the topology does not list`;
      return;
    }
    if (p.copies.includes(n)) return;
    p.copies.push(n);
    if (suspended?.includes(id)) this.nodes[n]!.suspended = true;
    else if (follower) p.followers.push(n);
  }

  /** Bytes a learner on node n copies: after the retained copy's durable offset when it holds one. */
  bytesTo(p: PartState, n: number): number {
    return p.retained?.get(n) ?? p.bytes;
  }

  /** Adds (sign 1) or removes (sign -1) the load of p's copy on node n. */
  addLoad(p: PartState, n: number, owner: boolean, sign: 1 | -1): void {
    const ns = this.nodes[n]!;
    if (owner) ns.owned += sign;
    else ns.followed += sign;
    ns.hist += sign * p.hw;
    ns.traffic += sign * copyTraffic(p, owner);
    ns.bytes += sign * p.bytes;
    if (sign === 1) ns.parts.push(p.index);
    else {
      const i = ns.parts.indexOf(p.index);
      ns.parts[i] = ns.parts[ns.parts.length - 1]!;
      ns.parts.pop();
    }
  }

  /** A move in flight counts as done for the load (arriving at `to`, gone from `from`) plus its bytes as sync. */
  private applyInFlight(m: InFlightMove): void {
    const pi = this.partIndex.get(m.partition);
    const to = this.nodeIndex.get(m.to);
    const from = m.from === null ? undefined : this.nodeIndex.get(m.from);
    if (pi === undefined || to === undefined) return;
    const p = this.parts[pi]!;
    p.busy ??= `a ${m.op.replace('_', ' ')} in flight`;
    if (m.op === 'owner_handoff') {
      if (from !== undefined && p.owner === from && p.copies.includes(to)) this.handoff(p, from, to);
      return;
    }
    if (from !== undefined && from !== p.owner && p.copies.includes(from)) {
      this.addLoad(p, from, false, -1);
      p.copies = p.copies.filter((c) => c !== from);
      p.followers = p.followers.filter((c) => c !== from);
    }
    if (!p.copies.includes(to)) {
      this.addLoad(p, to, false, 1);
      p.copies.push(to);
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

  followerMove(p: PartState, from: number, to: number): void {
    this.addLoad(p, from, false, -1);
    this.addLoad(p, to, false, 1);
    p.copies = p.copies.map((c) => (c === from ? to : c));
    p.followers = p.followers.map((c) => (c === from ? to : c));
  }

  handoff(p: PartState, from: number, to: number): void {
    this.addLoad(p, from, true, -1);
    this.addLoad(p, to, false, -1);
    this.addLoad(p, from, false, 1);
    this.addLoad(p, to, true, 1);
    p.owner = to;
    p.followers = p.followers.map((c) => (c === to ? from : c));
  }

  /** Score without the transient sync term: what the node carries once its transfers are done. */
  steady(n: NodeState): number {
    const w = this.w;
    return (w.owned * n.owned + w.followed * n.followed + w.history * n.hist + w.traffic * n.traffic) / (n.cap * this.wSum);
  }

  syncTerm(n: NodeState): number {
    return (this.w.sync * n.sync) / (n.cap * this.wSum);
  }

  /** The largest change one follower copy makes to the steady score of a node of capacity `cap`. */
  maxFollowerDelta(cap: number): number {
    if (this.maxFollowerLoad < 0) {
      const w = this.w;
      this.maxFollowerLoad = 0;
      for (const p of this.parts)
        this.maxFollowerLoad = Math.max(this.maxFollowerLoad, w.followed + w.history * p.hw + w.traffic * copyTraffic(p, false));
    }
    return this.maxFollowerLoad / (cap * this.wSum);
  }
  private maxFollowerLoad = -1;

  /** Change of a node's steady score when a copy of p in the given role arrives (sign 1) or leaves (-1). */
  copyDelta(p: PartState, n: NodeState, owner: boolean, sign: 1 | -1): number {
    const w = this.w;
    const v = (owner ? w.owned : w.followed) + w.history * p.hw + w.traffic * copyTraffic(p, owner);
    return (sign * v) / (n.cap * this.wSum);
  }

  /** Change of a node's steady score when it becomes p's owner (sign 1) or stops being it (-1), keeping its copy. */
  roleDelta(p: PartState, n: NodeState, sign: 1 | -1): number {
    const w = this.w;
    return (sign * (w.owned - w.followed + w.traffic * p.del)) / (n.cap * this.wSum);
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

  scores(): NodeScore[] {
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
        followed: (w.followed * n.followed) / (n.cap * f),
        history: (w.history * n.hist) / (n.cap * f),
        traffic: (w.traffic * n.traffic) / (n.cap * f),
        sync: this.syncTerm(n),
        total: steady + this.syncTerm(n),
      };
    });
  }
}
