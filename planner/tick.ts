/**
 * One tick's search: the state, the rules every step of the policy checks (the band, the margin, zones, cooldowns,
 * pins, exclusions, transfer limits), and what it has proposed so far. Each proposal is applied to the state at
 * once, so the next one sees its effect (load arrived, bytes to copy, a transfer slot taken). The steps themselves
 * are in their own files, in the order policy.ts runs them.
 */
import { BandMeter } from './bands';
import { bandsOf } from './config';
import type { ClusterState, NodeState } from './state';
import type { PlanInput, PlannerConfig, Proposal } from './types';

/** Copies whose fit (see `BandMeter.copyFit`) differs by less than this are ranked by bytes per unit of improvement. */
export const NEAR_TOLERANCE = 0.01;

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
  /** Draining nodes another caller drains (PlanInput.drainedElsewhere). */
  drainedElsewhere: ReadonlySet<string>;
  /** Nodes that gave or received a copy of each partition earlier in the plan: that replica never moves again or back. */
  moved: Map<number, Set<number>>;
  /** Nodes that owned each partition earlier in the plan: ownership never goes back. */
  formerOwners: Map<number, Set<number>>;
}

export interface Tick {
  proposals: Proposal[];
  idleReason: string | null;
}

export const f2 = (x: number): string => x.toFixed(3);
const until = (at: number): string => (Number.isFinite(at) ? `until ${new Date(at).toISOString()}` : 'while another drain holds it');

export interface Candidate {
  p: number;
  s: NodeState;
  r: NodeState;
  imp: number;
  bytes: number;
  /** How well the copy fits what the pair lacks and has too much of (see `BandMeter.copyFit`), 0 at best. */
  near: number;
  /** s owns p: it first hands the owner role to this follower, and its copy moves once a follower's (see `freedCopy`). */
  via?: NodeState;
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
  /** Why the band step proposed nothing while a node was outside a band (see `bandsIdleReason`). */
  bandsBlocked: string | null = null;
  /**
   * Receivers a handoff frees a retained copy for (`freedCopy`), of this tick or in flight: they take no whole copy
   * before it can move (the loop's next tick copied a partition whole while the handoff ran).
   */
  readonly awaitingFreed = new Set<number>();
  /** The first step a cooldown or a busy partition held back that would otherwise have been proposed: the idle reason's detail. */
  held: string | null = null;
  /** Partitions held whole and nodes cooling down at this tick's clock, by index (node cooldowns as end times, 0 when none). */
  private readonly coolingParts = new Map<number, number>();
  private readonly coolingNodes: Float64Array;
  /** Per partition, the nodes a cooled move left and those it arrived on, each with when its cooldown ends. */
  private readonly coolLeft = new Map<number, Map<number, number>>();
  private readonly coolArrived = new Map<number, Map<number, number>>();
  /** Steady deviation from the mean and the receiver's deviation (sync included) per node, refreshed per proposal. */
  readonly devs: Float64Array;
  readonly recvDevs: Float64Array;
  /**
   * `ClusterState.ownerGap` per node, refreshed with the deviations: the follower step weighs every node with it per
   * proposal, and computed each time it was the hottest line of a plan at 100,000 partitions.
   */
  private readonly ownerGaps: Float64Array;

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
    for (const p of st.handingOff) for (const r of st.retainedAt(p)?.keys() ?? []) this.awaitingFreed.add(r);
    this.devs = new Float64Array(st.nodes.length);
    this.recvDevs = new Float64Array(st.nodes.length);
    this.ownerGaps = new Float64Array(st.nodes.length);
    this.refresh(...st.nodes);
  }

  /** Recomputes the deviations of the nodes a proposal touched: nothing else changes, and the mean is fixed. */
  refresh(...nodes: NodeState[]): void {
    this.aboveReplicaBand = null;
    this.aboveReplicaShare = null;
    for (const n of nodes) {
      this.meter.note(n);
      const d = this.st.steady(n) - this.st.mean;
      this.devs[n.index] = d;
      this.recvDevs[n.index] = d + this.st.syncTerm(n);
      this.ownerGaps[n.index] = this.st.ownerGap(n);
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

  /** Some node above its replica band, and some node that can give a copy and stay at its share, as of the last proposal (known once asked). */
  private aboveReplicaBand: boolean | null = null;
  private aboveReplicaShare: boolean | null = null;

  replicasAboveBand(): boolean {
    return (this.aboveReplicaBand ??= this.meter.anyAboveReplicaBand());
  }

  replicasAboveShare(): boolean {
    return (this.aboveReplicaShare ??= this.meter.anyAboveReplicaShare());
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

  /** `n` could receive but for its transfer limit: every slot is taken. */
  onlyBusy(n: NodeState): boolean {
    return n.live && !n.draining && !n.suspended && !this.excluded(n) && n.inbound >= this.ctx.config.maxTransfersPerNode;
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
   * A new copy of p may go to `to` in place of the one on `gone` (a repair of a lost copy, or a drain): into a zone
   * holding no more of p's other copies than any zone with a node that could take one. Unlike a move's rule, the
   * zone the copy leaves gets no say once it has no such node: a zone whose only node was lost or drains leaves the
   * copy to the next emptiest zone, rather than the partition a copy short for good or the drain stuck.
   */
  canAdd(p: number, to: NodeState, gone: NodeState): boolean {
    const st = this.st;
    if (st.holds(p, to.index) || this.ctx.moved.get(p)?.has(to.index)) return false;
    const inZone = (zone: string): number => {
      let c = 0;
      for (let i = p * st.stride, e = i + st.copyCount[p]!; i < e; i++) if (st.copyNode[i] !== gone.index && st.nodes[st.copyNode[i]!]!.zone === zone) c++;
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

  /**
   * `recvDev` as the follower-move step judges a receiver: counting the owner roles it lacks as if the handoffs
   * after the follower moves had brought them (`ownerGap`, never below 0). A node that owns nothing yet scores low
   * on owner roles, and copies sent to make that up would take it past its replica band.
   */
  copyRecvDev(n: NodeState): number {
    return this.recvDev(n) + Math.max(0, this.ownerGaps[n.index]!);
  }

  /**
   * `dev` as the follower-move step judges a source: counting the owner roles it holds beyond its share as if the
   * handoffs after the follower moves had taken them (`ownerGap`, never above 0). A node that still owns every
   * partition it owned before a join scores high on owner roles, and copies it gives to make that up would take it
   * below its replica band.
   */
  copySrcDev(n: NodeState): number {
    return this.dev(n) + Math.min(0, this.ownerGaps[n.index]!);
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

  /** A node in a step's reason: its id, and its score (mean + deviation `d`) with the side of the band it is outside. */
  side(n: NodeState, d: number): string {
    const t = this.ctx.config.threshold;
    return `${n.id} (score ${f2(d + this.st.mean)}${d > t ? ` > mean + ${t}` : d < -t ? ` < mean - ${t}` : ''})`;
  }

  /** The better of `best` and moving p from s (deviation ds, dS after) to r. */
  better(best: Candidate | null, p: number, s: NodeState, r: NodeState, ds: number, dS: number): Candidate | null {
    const dr = this.dev(r);
    if (!this.outsideBand(this.copySrcDev(s), this.copyRecvDev(r))) return best;
    // The fit first: it is cheap, and a copy that fits worse than the best so far loses before the costlier checks.
    const near = this.meter.copyFit(p, s, r);
    if (best !== null && near < best.near - NEAR_TOLERANCE) return best;
    const imp = Math.max(ds, Math.abs(dr)) - Math.max(Math.abs(dS), Math.abs(dr + this.st.copyDelta(p, r, false, 1)));
    if (!this.improves(imp) || !this.keepsBands(p, s, r)) return best;
    // A source that would fall below its replica share while another node stays above its replica band keeps its
    // copy: the receiver takes that node's instead (a node scoring high on traffic and disk gave its cold copies and
    // then took copies back from the nodes left above); a retained copy on the receiver, which costs only what it
    // lacks, still goes. Nor does a source give a copy that takes it below its replica band while another node could
    // give one and stay at its share (the same node, once every node was inside its replica band, gave on and took
    // retained copies back).
    const bytes = this.st.bytesTo(p, r.index);
    if (bytes >= this.st.bytes[p]! && this.meter.belowReplicaShareWithout(s) && this.replicasAboveBand()) return best;
    if (bytes >= this.st.bytes[p]! && this.meter.belowReplicaBandWithout(s) && this.replicasAboveShare()) return best;
    const cooled = this.stepCooldown(p, s, r);
    if (cooled !== null) {
      this.hold(cooled);
      return best;
    }
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
      else if (d < -t && n.inbound > 0) this.blocked ??= `${n.id} is ${f2(-d)} below the mean but catching up on transfers in flight`;
      else if (d < -t) this.blocked ??= `${n.id} is ${f2(-d)} below the mean but no copy it lacks may move to it now (cooling down, held by a drain, busy or already there)`;
    }
  }
}
