/**
 * The note's policy, one tick at a time: what may start now on a ClusterState, within the transfer limits.
 * Order: nothing while any recovery is pending; lost copies are replaced first (repair.ts); a draining node's copies leave next (owners by handoff, then
 * follower moves); then follower moves from nodes above mean + threshold to nodes below mean - threshold; owner
 * handoffs only once no follower move is in flight or proposed. Each proposal is applied to the state at once, so
 * the next one sees its effect (load arrived, bytes to copy, a transfer slot taken).
 */
import { balanceBands, BandMeter } from './bands';
import { bandsOf } from './config';
import { repair } from './repair';
import type { ClusterState, NodeState } from './state';
import type { PlanInput, PlannerConfig, Proposal } from './types';

/** Receivers tried per partition besides those holding a retained copy: the least loaded ones. */
const RECEIVERS_PER_PARTITION = 8;
/**
 * Sources (most loaded first) and receivers (least loaded first) searched per proposal: past them a move would
 * involve a node near the mean, and bounding the search keeps a tick fast on a large cluster.
 */
const SOURCES_PER_PROPOSAL = 64;
/** Copies whose fit (see `BandMeter.copyFit`) differs by less than this are ranked by bytes per unit of improvement. */
const NEAR_TOLERANCE = 0.01;

export interface TickContext {
  config: PlannerConfig;
  now: number;
  cooldowns: PlanInput['cooldowns'];
  /** Moves in flight (count against the cluster limit). */
  inFlight: number;
  /** Copies in transfer (follower moves, repairs): owner handoffs wait for them. */
  followerMovesInFlight: boolean;
  /** Plan repairs of lost copies (PlanInput.repair). */
  repair: boolean;
  /** Nodes that gave or received a copy of each partition earlier in the plan: that replica never moves again or back. */
  moved: Map<number, Set<number>>;
  /** Nodes that owned each partition earlier in the plan: ownership never goes back. */
  formerOwners: Map<number, Set<number>>;
}

export interface Tick {
  proposals: Proposal[];
  idleReason: string | null;
}

const f2 = (x: number): string => x.toFixed(3);
const until = (at: number): string => (Number.isFinite(at) ? `until ${new Date(at).toISOString()}` : 'while another drain holds it');

/**
 * The `k` nodes with the smallest keys (`sign` times their entry in `by`), in ascending order, without sorting
 * them all; equal keys keep the order of `items`.
 */
function smallest(items: NodeState[], by: Float64Array, sign: 1 | -1, k: number): NodeState[] {
  // Kept sorted in typed arrays: a binary search finds the place and copyWithin shifts the rest in one move.
  const idx = new Int32Array(k);
  const keys = new Float64Array(k);
  let n = 0;
  for (let j = 0; j < items.length; j++) {
    const v = sign * by[items[j]!.index]!;
    if (n === k && v >= keys[k - 1]!) continue;
    let lo = 0;
    let hi = n === k ? k - 1 : n;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (keys[mid]! > v) hi = mid;
      else lo = mid + 1;
    }
    const end = n === k ? k - 1 : n++;
    idx.copyWithin(lo + 1, lo, end);
    keys.copyWithin(lo + 1, lo, end);
    idx[lo] = j;
    keys[lo] = v;
  }
  return Array.from(idx.subarray(0, n), (j) => items[j]!);
}

interface Candidate {
  p: number;
  s: NodeState;
  r: NodeState;
  imp: number;
  bytes: number;
  /** How well the copy fits what the pair lacks and has too much of (see `BandMeter.copyFit`), 0 at best. */
  near: number;
}

/** One tick's search: the state, its rules, and what it has proposed so far. */
export class TickPlanner {
  readonly out: Proposal[] = [];
  readonly touched = new Set<number>();
  free: number;
  blocked: string | null = null;
  /** The first pinned partition a balancing move or handoff passed over: named when nothing else starts. */
  pinHit: number | null = null;
  /** The bands every node should end inside (config defaults filled in), measured for this pass. */
  readonly meter: BandMeter;
  /** The node and dimension the band step left outside its band, and why: the idle reason once nothing else is. */
  bandsBlocked: string | null = null;
  /** The first step a cooldown or a busy partition held back that would otherwise have been proposed: the idle reason's detail. */
  held: string | null = null;
  /** Partitions held whole and nodes cooling down at this tick's clock, by index (node cooldowns as end times, 0 when none). */
  private readonly coolingParts = new Map<number, number>();
  private readonly coolingNodes: Float64Array;
  /** Per partition, the nodes a cooled move left and those it arrived on, each with when its cooldown ends. */
  private readonly coolLeft = new Map<number, Map<number, number>>();
  private readonly coolArrived = new Map<number, Map<number, number>>();
  /** Steady deviation from the mean and the receiver's deviation (sync included) per node, refreshed per proposal. */
  private devs: Float64Array;
  private recvDevs: Float64Array;

  constructor(
    readonly st: ClusterState,
    readonly ctx: TickContext,
  ) {
    this.free = ctx.config.maxTransfersPerCluster - ctx.inFlight;
    this.meter = new BandMeter(st, bandsOf(ctx.config));
    for (const [id, until] of Object.entries(ctx.cooldowns.partitions)) {
      const i = st.partIndex.get(id);
      if (i !== undefined && until > ctx.now) this.coolingParts.set(i, until);
    }
    this.coolingNodes = new Float64Array(st.nodes.length);
    for (const [id, until] of Object.entries(ctx.cooldowns.nodes)) {
      const i = st.nodeIndex.get(id);
      if (i !== undefined && until > ctx.now) this.coolingNodes[i] = until;
    }
    const mark = (m: Map<number, Map<number, number>>, p: number, node: string | null, until: number) => {
      const n = node === null ? undefined : st.nodeIndex.get(node);
      if (n === undefined) return;
      let at = m.get(p);
      if (at === undefined) m.set(p, (at = new Map()));
      at.set(n, Math.max(at.get(n) ?? 0, until));
    };
    for (const [id, moves] of Object.entries(ctx.cooldowns.moves ?? {})) {
      const p = st.partIndex.get(id);
      if (p === undefined) continue;
      for (const m of moves) {
        if (m.until <= ctx.now) continue;
        mark(this.coolLeft, p, m.from, m.until);
        mark(this.coolArrived, p, m.to, m.until);
      }
    }
    this.devs = new Float64Array(st.nodes.length);
    this.recvDevs = new Float64Array(st.nodes.length);
    this.refresh(...st.nodes);
  }

  /** Recomputes the deviations of the nodes a proposal touched: nothing else changes, and the mean is fixed. */
  refresh(...nodes: NodeState[]): void {
    for (const n of nodes) {
      this.meter.note(n);
      const d = this.st.steady(n) - this.st.mean;
      this.devs[n.index] = d;
      this.recvDevs[n.index] = d + this.st.syncTerm(n);
    }
  }

  /** Records which nodes took part in a partition's move, so the plan never moves that replica again or back. */
  remember(m: Map<number, Set<number>>, p: number, ...nodes: number[]): void {
    let s = m.get(p);
    if (s === undefined) m.set(p, (s = new Set()));
    for (const n of nodes) s.add(n);
  }

  /** Why nothing may start at all: a recovery pending anywhere pauses rebalancing and drains. */
  paused(): string | null {
    const rs = this.st.recoveries;
    if (rs.length === 0) return null;
    const more = rs.length > 1 ? ` and ${rs.length - 1} more` : '';
    return `recovery pending on ${rs[0]!.id} (${rs[0]!.reason})${more}: rebalancing and drains wait until it activates`;
  }

  partFree(p: number): boolean {
    return this.movable(p) && !this.pinned(p);
  }

  /** Free but for an operator's pin: no change in flight, not moved in this plan, not cooling down. */
  movable(p: number): boolean {
    return this.st.busy[p] === null && !this.touched.has(p) && !this.coolingParts.has(p);
  }

  /** Pinned by an operator: the loop starts nothing on it. */
  pinned(p: number): boolean {
    return this.st.pins.has(p);
  }

  /** Excluded by an operator: no copy or ownership moves onto or off it. */
  excluded(n: NodeState): boolean {
    return n.excluded !== null;
  }

  /** Remembers the first pinned partition passed over that was otherwise free to move. */
  notePinned(p: number): void {
    if (this.pinHit === null && this.pinned(p) && this.movable(p)) this.pinHit = p;
  }

  /** The pin passed over, in words, or ''. */
  pinNote(): string {
    return this.pinHit === null ? '' : `; ${this.st.id(this.pinHit)} is left alone (${this.st.pins.get(this.pinHit)})`;
  }

  /** Why p is not free, in words. */
  whyBusy(p: number): string {
    const whole = this.coolingParts.get(p);
    return this.st.busy[p] ?? this.st.pins.get(p) ?? (whole !== undefined ? `cooling down ${until(whole)}` : 'moved earlier in this plan');
  }

  /**
   * Why p's partition cooldown holds a step from `from` to `to` (a follower move or a handoff), or null: it would
   * take a copy or the owner role off the node a cooled move brought it to, or back onto the node it left.
   */
  stepCooldown(p: number, from: NodeState, to: NodeState): string | null {
    const off = this.coolArrived.get(p)?.get(from.index);
    if (off !== undefined) return `${this.st.id(p)} stays on ${from.id}, where it just arrived, ${until(off)} (partition cooldown)`;
    const back = this.coolLeft.get(p)?.get(to.index);
    if (back !== undefined) return `${this.st.id(p)} does not go back to ${to.id}, which it just left, ${until(back)} (partition cooldown)`;
    return null;
  }

  /** The band guard of a follower copy of p moving from s to r (see `keepsBands`). */
  keepsBands(p: number, s: NodeState, r: NodeState): boolean {
    return this.meter.copyKeeps(p, s, r);
  }

  /** Keeps the first reason a step that would have been proposed was held back. */
  hold(reason: string): void {
    this.held ??= reason;
  }

  /**
   * A node that just received copies sheds no copy until its node cooldown ends: it is not judged overloaded and
   * drained again. Its owner roles may still go, as a handoff moves no bytes and sends back nothing it received.
   */
  cooling(n: NodeState): boolean {
    return this.coolingNodes[n.index]! > 0;
  }

  /** May take a transfer now: live, staying, not rejoining, a free slot in the sync budget. */
  receiverOk(n: NodeState): boolean {
    return n.live && !n.draining && !n.suspended && !this.excluded(n) && n.inbound < this.ctx.config.maxTransfersPerNode;
  }

  /** A copy of p may go from `from` to `to`: not there already, not back, and no zone gets more copies than before. */
  canReceive(p: number, to: NodeState, from: NodeState): boolean {
    const st = this.st;
    if (st.holds(p, to.index) || this.ctx.moved.get(p)?.has(to.index)) return false;
    let inTo = 0;
    let inFrom = 0;
    for (let i = p * st.stride, e = i + st.copyCount[p]!; i < e; i++) {
      const c = st.copyNode[i]!;
      if (c === from.index) continue;
      const z = this.st.nodes[c]!.zone;
      if (z === to.zone) inTo++;
      if (z === from.zone) inFrom++;
    }
    return inTo <= inFrom;
  }

  /**
   * A new copy of p may go to `to` in place of the one on `lost` (a repair): into a zone holding no more of p's other
   * copies than any zone with a node that could take one. Unlike a move's rule, the lost copy's zone gets no say
   * once it has no such node: a zone whose only node was lost leaves the copy to the next emptiest zone, rather than
   * the partition a copy short for good.
   */
  canAdd(p: number, to: NodeState, lost: NodeState): boolean {
    const st = this.st;
    if (st.holds(p, to.index) || this.ctx.moved.get(p)?.has(to.index)) return false;
    const inZone = (zone: string): number => {
      let c = 0;
      for (let i = p * st.stride, e = i + st.copyCount[p]!; i < e; i++) if (st.copyNode[i] !== lost.index && st.nodes[st.copyNode[i]!]!.zone === zone) c++;
      return c;
    };
    const mine = inZone(to.zone);
    for (const r of st.nodes) {
      if (r.zone !== to.zone && st.stays(r) && !r.suspended && !this.excluded(r) && !st.holds(p, r.index) && inZone(r.zone) < mine) return false;
    }
    return true;
  }

  /**
   * Why no copy on n may leave it, or null: each is a stream or is held by the zone rule (no other node that stays
   * may take it without a zone getting more copies of its partition than n's zone keeps; transfer slots aside). A
   * node above the band that is zone-bound can shed owner roles only: what is left is what its zone must hold.
   */
  zoneBound(n: NodeState): string | null {
    const st = this.st;
    if (n.parts.length === 0) return null;
    for (const p of n.parts) {
      const busy = st.busy[p];
      if (busy !== null) {
        if (st.isStream(p)) continue;
        return null;
      }
      for (const r of st.nodes) {
        if (r !== n && st.stays(r) && !st.holds(p, r.index) && this.canReceive(p, r, n)) return null;
      }
    }
    return `every copy on ${n.id} stays by the zone rule: no other node may take one without its zone getting more copies of the partition than ${n.zone} keeps`;
  }

  dev(n: NodeState): number {
    return this.devs[n.index]!;
  }

  /** Deviation a receiver is judged by: its transfers still to copy count, so nothing piles onto a node catching up. */
  recvDev(n: NodeState): number {
    return this.recvDevs[n.index]!;
  }

  followerMove(p: number, from: NodeState, to: NodeState, reason: string): void {
    const bytes = this.st.bytesTo(p, to.index);
    this.st.followerMove(p, from.index, to.index);
    this.st.addTransfer(to.index, from.index, bytes);
    this.remember(this.ctx.moved, p, from.index, to.index);
    this.touched.add(p);
    this.free--;
    const retained = this.st.retainedAt(p)?.has(to.index) ? `; ${to.id} holds a retained copy, so only ${bytes} bytes are copied` : '';
    this.out.push({ op: 'follower_move', partition: this.st.id(p), from: from.id, to: to.id, bytes, reason: reason + retained });
    this.refresh(from, to);
  }

  handoff(p: number, from: NodeState, to: NodeState, reason: string): void {
    this.st.handoff(p, from.index, to.index);
    this.remember(this.ctx.formerOwners, p, from.index);
    this.touched.add(p);
    this.free--;
    this.out.push({ op: 'owner_handoff', partition: this.st.id(p), from: from.id, to: to.id, bytes: 0, reason });
    this.refresh(from, to);
  }

  /**
   * Every copy leaves a draining node: owners by handoff to an admitted follower first, then follower moves. A
   * draining node that is down still sheds its follower copies (each move is then a replacement: the learner
   * copies from the owner, nothing is asked of the node); what it owns moves by ordinary recovery first.
   */
  drain(): void {
    for (const d of this.st.nodes) {
      if (!d.draining) continue;
      if (this.excluded(d)) {
        this.blocked ??= `drain of ${d.id}: ${d.id} is ${d.excluded}`;
        continue;
      }
      for (const p of [...d.parts]) {
        if (this.free <= 0) return;
        if (this.st.owner[p] !== d.index) continue;
        if (!d.live) {
          this.blocked ??= `drain of ${d.id}: ${d.id} is down and owns ${this.st.id(p)}: ordinary recovery moves its ownership first`;
          continue;
        }
        if (!this.partFree(p)) {
          this.blocked ??= `drain of ${d.id}: ${this.st.id(p)} waits (${this.whyBusy(p)})`;
          continue;
        }
        let best: NodeState | null = null;
        for (const f of this.st.followers(p)) {
          const n = this.st.nodes[f]!;
          if (!this.st.stays(n) || n.suspended || this.excluded(n) || this.ctx.formerOwners.get(p)?.has(f)) continue;
          if (best === null || this.dev(n) < this.dev(best)) best = n;
        }
        if (best === null) {
          this.blocked ??= `drain of ${d.id}: ${this.st.id(p)} has no admitted follower off draining or dead nodes to take ownership`;
          continue;
        }
        this.handoff(p, d, best, `drain ${d.id}: owner handed to ${best.id}, its admitted follower with the lowest score (${f2(this.st.steady(best))})`);
      }
      for (const p of [...d.parts]) {
        if (this.free <= 0) return;
        if (this.st.owner[p] === d.index || !this.st.isFollower(p, d.index)) continue;
        if (!this.partFree(p)) {
          this.blocked ??= `drain of ${d.id}: ${this.st.id(p)} waits (${this.whyBusy(p)})`;
          continue;
        }
        const to = this.drainTarget(p, d);
        if (to === null) {
          this.blocked ??= `drain of ${d.id}: no node can take ${this.st.id(p)} now (transfer limits, zones, copies already there)`;
          continue;
        }
        this.followerMove(p, d, to, `drain ${d.id}: ${to.id} has the lowest score that can take it (${f2(this.recvDev(to) + this.st.mean)})`);
      }
    }
  }

  /**
   * The least loaded node that may take p's copy from d (`fits`: the zone rule of a move, unless told otherwise); a
   * retained copy wins when taking it keeps the node within the threshold.
   */
  drainTarget(p: number, d: NodeState, fits = (r: NodeState) => this.canReceive(p, r, d)): NodeState | null {
    const t = this.ctx.config.threshold;
    for (const rn of this.st.retainedAt(p)?.keys() ?? []) {
      const r = this.st.nodes[rn]!;
      if (this.receiverOk(r) && fits(r) && this.recvDev(r) + this.st.copyDelta(p, r, false, 1) <= t) return r;
    }
    let best: NodeState | null = null;
    for (const r of this.st.nodes) {
      if (!this.receiverOk(r) || !fits(r)) continue;
      if (best === null || this.recvDev(r) < this.recvDev(best)) best = r;
    }
    return best;
  }

  /**
   * A move goes from a node above the mean to one below it, and at least one of the two is outside the band
   * (above mean + threshold or below mean - threshold): overfull nodes shed toward underfull ones, and an
   * underfull node also pulls from nodes above the mean, or a node joining empty would stop far below the mean
   * as soon as the old ones are just inside the band. Best improvement of the pair's spread first.
   */
  balanceFollowers(): void {
    const { threshold: t, minImprovement } = this.ctx.config;
    while (this.free > 0) {
      // One pass over the nodes per proposal: a full plan makes thousands of proposals on 1,000 nodes.
      const allReceivers: NodeState[] = [];
      const above: NodeState[] = [];
      let smallestReceiver: NodeState | null = null;
      for (const n of this.st.nodes) {
        if (this.receiverOk(n) && this.recvDev(n) < 0) {
          allReceivers.push(n);
          if (smallestReceiver === null || n.cap < smallestReceiver.cap) smallestReceiver = n;
        }
        if (this.st.stays(n) && !this.cooling(n) && !this.excluded(n) && this.dev(n) > 0) above.push(n);
      }
      const sources = smallest(above, this.devs, -1, SOURCES_PER_PROPOSAL);
      const receivers = smallest(allReceivers, this.recvDevs, 1, SOURCES_PER_PROPOSAL);
      const over = sources.length > 0 && this.dev(sources[0]!) > t;
      if (sources.length === 0 || receivers.length === 0 || !this.outsideBand(this.dev(sources[0]!), this.recvDev(receivers[0]!))) {
        this.noteOutsideBand();
        return;
      }
      const minRecvCap = smallestReceiver!.cap;
      let best: Candidate | null = null;
      // Retained copies first, whichever source they would relieve: they cost the least, and the scan below stops at
      // the first source with a candidate. A source at or below the mean may give one too while it stays inside the band
      // (`better` then wants the receiver below the band): the copy costs only what it lacks, where one from a node
      // above the mean would cost its whole history.
      for (const r of allReceivers) {
        for (const p of this.st.retainedOn.get(r.index) ?? []) {
          if (!this.partFree(p)) {
            this.notePinned(p);
            continue;
          }
          for (const f of this.st.followers(p)) {
            const s = this.st.nodes[f]!;
            const ds = this.dev(s);
            const dS = ds + this.st.copyDelta(p, s, false, -1);
            if ((ds <= 0 && dS < -t) || !this.st.stays(s) || this.cooling(s) || this.excluded(s) || this.ctx.moved.get(p)?.has(f) || !this.canReceive(p, r, s)) continue;
            best = this.better(best, p, s, r, ds, dS);
          }
        }
      }
      for (const s of sources) {
        // A pair's spread improves by at most the larger of its two score changes: skip sources that cannot reach the margin.
        if (this.st.maxFollowerDelta(Math.min(s.cap, minRecvCap)) < minImprovement) continue;
        const ds = this.dev(s);
        const small = s.cap <= minRecvCap ? s : smallestReceiver!;
        for (const p of s.parts) {
          if (best !== null && !this.mayBeat(best, this.st.copyDelta(p, small, false, 1), this.meter.sourceFit(p, s))) continue;
          if (this.st.owner[p] === s.index || !this.st.isFollower(p, s.index)) continue;
          if (!this.partFree(p)) {
            this.notePinned(p);
            if (!this.touched.has(p)) this.hold(`${this.st.id(p)} on ${s.id} cannot move: ${this.whyBusy(p)}`);
            continue;
          }
          if (this.ctx.moved.get(p)?.has(s.index)) continue;
          const dS = ds + this.st.copyDelta(p, s, false, -1);
          for (const rn of this.st.retainedAt(p)?.keys() ?? []) {
            const r = this.st.nodes[rn]!;
            if (this.receiverOk(r) && this.recvDev(r) < 0 && this.canReceive(p, r, s)) best = this.better(best, p, s, r, ds, dS);
          }
          let k = 0;
          for (const r of receivers) {
            if (k >= RECEIVERS_PER_PARTITION) break;
            if (!this.canReceive(p, r, s)) continue;
            k++;
            best = this.better(best, p, s, r, ds, dS);
          }
        }
        if (best !== null) break;
      }
      if (best === null) {
        const who = over ? `${sources[0]!.id} is ${f2(this.dev(sources[0]!))} above` : `${receivers[0]!.id} is ${f2(-this.recvDev(receivers[0]!))} below`;
        const bound = over ? this.zoneBound(sources[0]!) : null;
        if (bound !== null) this.blocked ??= `${who} the mean, but ${bound}; it sheds owner roles only`;
        this.blocked ??=
          this.held === null
            ? `${who} the mean but no follower move improves the spread by ${minImprovement} within the zone, cooldown and transfer limit rules${this.pinNote()}`
            : `${who} the mean but no follower move can start: ${this.held}`;
        return;
      }
      const { p, s, r, imp } = best;
      this.followerMove(p, s, r, `${this.side(s, this.dev(s))} sheds to ${this.side(r, this.recvDev(r))}, mean ${f2(this.st.mean)}: their spread improves by ${f2(imp)}`);
    }
  }

  /** A node in a step's reason: its id, and its score (mean + deviation `d`) with the side of the band it is outside. */
  side(n: NodeState, d: number): string {
    const t = this.ctx.config.threshold;
    return `${n.id} (score ${f2(d + this.st.mean)}${d > t ? ` > mean + ${t}` : d < -t ? ` < mean - ${t}` : ''})`;
  }

  /** The better of `best` and moving p from s (deviation ds, dS after) to r. */
  better(best: Candidate | null, p: number, s: NodeState, r: NodeState, ds: number, dS: number): Candidate | null {
    const dr = this.dev(r);
    if (!this.outsideBand(ds, this.recvDev(r))) return best;
    // The fit first: it is cheap, and a copy that fits worse than the best so far loses before the costlier checks.
    const near = this.meter.copyFit(p, s, r);
    if (best !== null && near < best.near - NEAR_TOLERANCE) return best;
    const imp = Math.max(ds, Math.abs(dr)) - Math.max(Math.abs(dS), Math.abs(dr + this.st.copyDelta(p, r, false, 1)));
    if (!this.improves(imp) || !this.keepsBands(p, s, r)) return best;
    const cooled = this.stepCooldown(p, s, r);
    if (cooled !== null) {
      this.hold(cooled);
      return best;
    }
    const bytes = this.st.bytesTo(p, r.index);
    return best === null || this.wins(imp, bytes, near, s, best) ? { p, s, r, imp, bytes, near } : best;
  }


  /**
   * Bytes per unit of improvement decide, so the smallest copies that fix the imbalance move (a retained copy,
   * which costs only what it lacks, above all); within a tenth of each other the larger improvement wins (fewer
   * moves), and between improvements within a tenth too, the more loaded source, so one source does not give so
   * much that it falls out of the band and needs copies back at full price.
   */
  wins(imp: number, bytes: number, near: number, s: NodeState, best: Candidate): boolean {
    if (Math.abs(near - best.near) > NEAR_TOLERANCE) return near > best.near;
    // bytes / imp against best.bytes / best.imp, cross-multiplied: both improvements are above 0.
    const mine = bytes * best.imp;
    const theirs = best.bytes * imp;
    if (mine < 0.9 * theirs) return true;
    if (mine > 1.1 * theirs) return false;
    if (Math.abs(imp - best.imp) > 0.1 * Math.max(imp, best.imp)) return imp > best.imp;
    return this.dev(s) > this.dev(best.s);
  }

  /**
   * Whether a copy could replace `best` when the pair's spread improves by at most `bound` (the copy's larger score
   * change) and its fit is at most `fit` (see `wins`): a search skips the others, which on a large cluster is nearly
   * every copy.
   */
  mayBeat(best: Candidate, bound: number, fit: number): boolean {
    return this.improves(bound) && fit >= best.near - NEAR_TOLERANCE;
  }

  /** The margin rule: a move must lower its pair's spread by at least minImprovement. */
  improves(imp: number): boolean {
    return imp >= this.ctx.config.minImprovement;
  }

  /** The band rule: a move between a node `ds` above the mean and one `dr` below it needs one of them outside the band. */
  outsideBand(ds: number, dr: number): boolean {
    const t = this.ctx.config.threshold;
    return ds > t || dr < -t;
  }

  /** A node outside the band that no move can serve: say why (cooling down, no transfer slot, rejoining). */
  noteOutsideBand(): void {
    const t = this.ctx.config.threshold;
    for (const n of this.st.nodes) {
      if (!this.st.stays(n)) continue;
      const d = this.dev(n);
      if (this.excluded(n) && Math.abs(d) > t) this.blocked ??= `${n.id} is ${f2(Math.abs(d))} ${d > 0 ? 'above' : 'below'} the mean but ${n.excluded}`;
      else if (d > t && this.cooling(n)) this.blocked ??= `${n.id} is ${f2(d)} above the mean but cooling down after receiving copies ${until(this.coolingNodes[n.index]!)} (node cooldown)`;
      else if (d < -t && !this.receiverOk(n)) {
        const why = n.suspended
          ? `${n.id} holds a suspended copy: rejoining replicas come first`
          : `${n.id} already receives ${n.inbound} of ${this.ctx.config.maxTransfersPerNode} copies (the per-node transfer limit of the sync budget)`;
        this.blocked ??= `${n.id} is ${f2(-d)} below the mean but cannot take a transfer now (${why})`;
      }
      else if (d < -t) this.blocked ??= `${n.id} is ${f2(-d)} below the mean but catching up on transfers in flight`;
    }
  }

  /**
   * Owner handoffs to an admitted follower, once no follower move is in flight or proposed. Two reasons, each under
   * its two-sided band rule. The total score, where it is still outside the band (the zone rule can hold every copy
   * of a zone's only node, see `zoneBound`, or keep away every copy a node could take): owner roles, the part of the
   * load a handoff moves, go from a node above the mean to a follower below it, one of them outside the band, while
   * the pair's spread improves. Then owned partitions per capacity (`od`), with the totals kept from spreading
   * further. The total is the note's load score: owned counts give way to it where both cannot be met, and the owned
   * rule hands nothing back, as that would take a total out of the band again.
   */
  balanceOwners(): void {
    const t = this.ctx.config.threshold;
    const mo = this.st.meanOwned();
    if (mo <= 0) return;
    const od = (n: NodeState): number => this.st.ownedDev(n, mo);
    while (this.free > 0) {
      const heavy = (n: NodeState): boolean => this.dev(n) > t;
      const sources = this.st.nodes.filter((n) => this.st.stays(n) && !this.excluded(n) && (od(n) > 0 || this.dev(n) > 0));
      if (sources.length === 0) return;
      // Heavy nodes first, the heaviest first; then by owned partitions.
      sources.sort((a, b) => Number(heavy(b)) - Number(heavy(a)) || (heavy(a) ? this.dev(b) - this.dev(a) : od(b) - od(a)));
      let best = null as { p: number; s: NodeState; d: NodeState; imp: number; near: number; byTotal: boolean } | null;
      let held: string | null = null;
      for (const s of sources) {
        const a = od(s);
        const ts = this.dev(s);
        for (const p of s.parts) {
          if (this.st.owner[p] !== s.index) continue;
          // A pinned partition is weighed only to name its pin when it is what keeps a handoff from starting.
          const pinned = this.pinned(p) && this.movable(p);
          if (!pinned && !this.partFree(p)) {
            if (!this.touched.has(p) && (this.outsideBand(a, 0) || heavy(s))) held ??= `${this.st.id(p)} owned by ${s.id} cannot be handed off: ${this.whyBusy(p)}`;
            continue;
          }
          for (const f of this.st.followers(p)) {
            const d = this.st.nodes[f]!;
            if (!this.st.stays(d) || d.suspended || this.excluded(d) || this.ctx.formerOwners.get(p)?.has(f)) continue;
            const b = od(d);
            const bAfter = b + 1 / (d.cap * mo);
            const td = this.dev(d);
            const after = Math.max(Math.abs(ts + this.st.roleDelta(p, s, -1)), Math.abs(td + this.st.roleDelta(p, d, 1)));
            let imp: number;
            let byTotal = false;
            if (ts > 0 && td < 0 && this.outsideBand(ts, td)) {
              // The band rule of a follower move, on the total: from above the mean to below it, one of them outside.
              imp = Math.max(ts, -td) - after;
              byTotal = true;
            } else if (heavy(s)) {
              // A node above the band gives its owner roles to nodes below the mean only, as its copies would go.
              continue;
            } else {
              if (a <= 0 || b >= 0 || !this.outsideBand(a, b)) continue;
              imp = Math.max(a, -b) - Math.max(Math.abs(a - 1 / (s.cap * mo)), Math.abs(bAfter));
              // The totals must stay inside the band, or at least not spread further.
              if (after > Math.max(t, Math.abs(ts), Math.abs(td))) continue;
            }
            // The total first: a node above the band sheds its owner roles past the receivers' owned band, as they are
            // what is left to shed where its copies cannot go (a zone's one node holds a copy of every partition).
            if (!this.improves(imp) || (!byTotal && !this.meter.roleKeeps(p, s, d))) continue;
            if (pinned) {
              this.pinHit ??= p;
              continue;
            }
            const cooled = this.stepCooldown(p, s, d);
            if (cooled !== null) {
              held ??= cooled;
              continue;
            }
            // Nearest the shares in owner roles and deliveries first (see `nearer`); then the larger improvement; equal
            // ones (a heavy source bounds them all): the receiver owning the least, so owners spread too.
            const near = this.meter.roleNearer(p, s, d);
            const nearBy = best === null ? 0 : near - best.near;
            if (best === null || nearBy > 1e-9 || (nearBy > -1e-9 && (imp > best.imp || (imp === best.imp && b < od(best.d))))) best = { p, s, d, imp, near, byTotal };
          }
        }
        if (best !== null) break;
      }
      if (best === null) {
        if (held !== null && this.out.length === 0) this.blocked ??= `no owner handoff can start: ${held}`;
        if (this.pinHit !== null) this.blocked ??= `no owner handoff may start${this.pinNote()}`;
        return;
      }
      const { p, s, d, imp, byTotal } = best;
      const why = byTotal
        ? `${this.side(s, this.dev(s))} hands an owner role to ${this.side(d, this.dev(d))}, an admitted follower below the mean: their spread improves by ${f2(imp)}`
        : `${s.id} owns ${f2(od(s))} above the mean per capacity, ${d.id} (an admitted follower) ${f2(-od(d))} below: their owner spread improves by ${f2(imp)}`;
      this.handoff(p, s, d, why);
    }
  }
}

export function proposeTick(st: ClusterState, ctx: TickContext): Tick {
  const tp = new TickPlanner(st, ctx);
  const paused = tp.paused();
  if (paused !== null) return { proposals: [], idleReason: paused };
  if (tp.free <= 0)
    return { proposals: [], idleReason: `cluster transfer limit reached: ${ctx.inFlight} of ${ctx.config.maxTransfersPerCluster} moves in flight` };
  if (!st.nodes.some((n) => st.stays(n))) return { proposals: [], idleReason: 'no live node that is not draining' };
  if (ctx.repair) repair(tp);
  tp.drain();
  tp.balanceFollowers();
  balanceBands(tp);
  if (!ctx.followerMovesInFlight && !tp.out.some((p) => p.op !== 'owner_handoff')) tp.balanceOwners();
  if (tp.out.length > 0) return { proposals: tp.out, idleReason: null };
  if (tp.blocked !== null) return { proposals: [], idleReason: tp.blocked };
  if (ctx.followerMovesInFlight) return { proposals: [], idleReason: 'follower moves in flight: owner handoffs wait until they end' };
  const t = ctx.config.threshold;
  const low = st.nodes.find((n) => st.stays(n) && tp.dev(n) < -t);
  if (low === undefined && tp.bandsBlocked !== null) return { proposals: [], idleReason: tp.bandsBlocked };
  return {
    proposals: [],
    idleReason:
      low === undefined
        ? `every node within the threshold: largest deviation from the mean ${f2(st.spread())} <= ${t}`
        : `${low.id} is ${f2(-tp.dev(low))} below the mean but no node is above mean + ${t} to shed to it`,
  };
}
