/** The score steps: follower moves, then owner handoffs, that bring every node's total score inside the band. */
import type { NodeState } from './state';
import { f2, type Candidate, type TickPlanner } from './tick';

/** Receivers tried per partition besides those holding a retained copy: the least loaded ones. */
const RECEIVERS_PER_PARTITION = 8;
/**
 * Sources (most loaded first) and receivers (least loaded first) searched per proposal: past them a move would
 * involve a node near the mean, and bounding the search keeps a tick fast on a large cluster.
 */
const SOURCES_PER_PROPOSAL = 64;

/**
 * The `k` nodes with the smallest keys (`sign` times their entry in `by`), in ascending order, without sorting
 * them all; equal keys keep the order of `items`.
 */
export function smallest(items: NodeState[], by: Float64Array, sign: 1 | -1, k: number): NodeState[] {
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

/**
 * A move goes from a node above the mean to one below it, and at least one of the two is outside the band
 * (above mean + threshold or below mean - threshold): overfull nodes shed toward underfull ones, and an
 * underfull node also pulls from nodes above the mean, or a node joining empty would stop far below the mean
 * as soon as the old ones are just inside the band. Best improvement of the pair's spread first.
 */
export function balanceFollowers(tp: TickPlanner): void {
  const { threshold: t, minImprovement } = tp.ctx.config;
  // Ranked once per step and kept so: a proposal changes its two nodes only, and a full plan makes thousands of
  // proposals on 1,000 nodes, where ranking every node again for each was the step's largest cost.
  const above = new Ranked(tp.devs, -1, SOURCES_PER_PROPOSAL, (n) => tp.st.stays(n) && !tp.cooling(n) && !tp.excluded(n) && tp.dev(n) > 0, tp.st.nodes);
  const allReceivers = new Ranked(tp.recvDevs, 1, SOURCES_PER_PROPOSAL, (n) => tp.receiverOk(n) && tp.copyRecvDev(n) < 0, tp.st.nodes);
  while (tp.free > 0) {
    const sources = above.first();
    const receivers = allReceivers.first();
    const over = sources.length > 0 && tp.dev(sources[0]!) > t;
    if (sources.length === 0 || receivers.length === 0 || !tp.outsideBand(Math.max(...sources.map((n) => tp.copySrcDev(n))), tp.copyRecvDev(receivers[0]!))) {
      tp.noteOutsideBand();
      return;
    }
    let minRecvCap = Infinity;
    for (const n of allReceivers.nodes) minRecvCap = Math.min(minRecvCap, n.capMin);
    let best: Candidate | null = null;
    /** The best retained copy an owner holds, taken only where nothing but whole copies could move otherwise. */
    let freed: Candidate | null = null;
    // Retained copies first, whichever source they would relieve: they cost the least, and the scan below stops at
    // the first source with a candidate. A source at or below the mean may give one too while it stays inside the band
    // (`better` then wants the receiver below the band): the copy costs only what it lacks, where one from a node
    // above the mean would cost its whole history.
    for (const r of tp.st.retainedOn.size === 0 ? [] : allReceivers.nodes) {
      for (const p of tp.st.retainedOn.get(r.index) ?? []) {
        if (!tp.partFree(p)) {
          tp.notePinned(p);
          continue;
        }
        for (const f of tp.st.followers(p)) {
          const s = tp.st.nodes[f]!;
          const ds = tp.dev(s);
          const dS = ds + tp.st.copyDelta(p, s, false, -1);
          if (!givesRetained(tp, p, s, r, ds, dS)) continue;
          best = tp.better(best, p, s, r, ds, dS);
        }
        freed = freedCopy(tp, freed, p, r);
      }
    }
    for (const s of sources) {
      // A pair's spread improves by at most the larger of its two score changes: skip sources that cannot reach the margin.
      if (tp.st.maxFollowerDelta(Math.min(s.capMin, minRecvCap)) < minImprovement) continue;
      const ds = tp.dev(s);
      const smallCap = Math.min(s.capMin, minRecvCap);
      for (const p of s.parts) {
        if (best !== null && !tp.mayBeat(best, tp.st.followerBound(p, smallCap), tp.meter.sourceFit(p, s))) continue;
        if (tp.st.owner[p] === s.index || !tp.st.isFollower(p, s.index)) continue;
        if (!tp.partFree(p)) {
          tp.notePinned(p);
          if (!tp.touched.has(p)) tp.hold(`${tp.st.id(p)} on ${s.id} cannot move: ${tp.whyBusy(p)}`);
          continue;
        }
        if (tp.ctx.moved.get(p)?.has(s.index)) continue;
        const dS = ds + tp.st.copyDelta(p, s, false, -1);
        for (const rn of tp.st.retainedAt(p)?.keys() ?? []) {
          const r = tp.st.nodes[rn]!;
          if (tp.receiverOk(r) && tp.copyRecvDev(r) < 0 && tp.canReceive(p, r, s)) best = tp.better(best, p, s, r, ds, dS);
        }
        let k = 0;
        for (const r of receivers) {
          if (k >= RECEIVERS_PER_PARTITION) break;
          if (!tp.canReceive(p, r, s)) continue;
          k++;
          best = tp.better(best, p, s, r, ds, dS);
        }
      }
      if (best !== null) break;
    }
    if (freed !== null && (best === null || best.bytes >= tp.st.bytes[best.p]!)) best = freed;
    if (best === null) {
      const who = over ? `${sources[0]!.id} is ${f2(tp.dev(sources[0]!))} above` : `${receivers[0]!.id} is ${f2(-tp.recvDev(receivers[0]!))} below`;
      const bound = over ? tp.zoneBound(sources[0]!) : null;
      if (bound !== null) tp.blocked ??= `${who} the mean, but ${bound}; it sheds owner roles only`;
      tp.blocked ??=
        tp.held === null
          ? `${who} the mean but no follower move improves the spread by ${minImprovement} within the zone, cooldown and transfer limit rules${tp.pinNote()}`
          : `${who} the mean but no follower move can start: ${tp.held}`;
      return;
    }
    const { p, s, r, imp, via } = best;
    if (via === undefined && tp.awaitingFreed.has(r.index) && best.bytes >= tp.st.bytes[p]!) {
      tp.blocked ??= `${r.id} takes no whole copy while a handoff frees a copy of a partition it holds a retained copy of, to move to it instead`;
      return;
    }
    const why = `${tp.side(s, tp.dev(s))} sheds to ${tp.side(r, tp.recvDev(r))}, mean ${f2(tp.st.mean)}: their spread improves by ${f2(imp)}`;
    if (via === undefined) tp.followerMove(p, s, r, why);
    else {
      tp.awaitingFreed.add(r.index);
      tp.handoff(p, s, via, `frees ${s.id}'s copy of ${tp.st.id(p)} to move to ${r.id}, which holds a retained copy of it, as a follower's: ${why}`);
    }
    for (const n of via === undefined ? [s, r] : [s, via]) {
      above.update(n);
      allReceivers.update(n);
    }
  }
}

/**
 * The nodes that pass `admits`, and the first `k` of them in the order `smallest` gives (ascending `sign` times their
 * entry in `by`, equal keys in node order), kept so as nodes change: `update` places a changed node again, and the
 * first `k` are taken again only when a node leaves them for a place that may not be among them.
 */
export class Ranked {
  /** In node order. */
  readonly nodes: NodeState[];
  private top: NodeState[] | null = null;

  constructor(
    private readonly by: Float64Array,
    private readonly sign: 1 | -1,
    private readonly k: number,
    private readonly admits: (n: NodeState) => boolean,
    all: readonly NodeState[],
  ) {
    this.nodes = all.filter(admits);
  }

  first(): NodeState[] {
    this.top ??= smallest(this.nodes, this.by, this.sign, this.k);
    return this.top;
  }

  /** n ranks before m. */
  private before(n: NodeState, m: NodeState): boolean {
    const [v, w] = [this.sign * this.by[n.index]!, this.sign * this.by[m.index]!];
    return v < w || (v === w && n.index < m.index);
  }

  update(n: NodeState): void {
    const at = this.nodes.indexOf(n);
    if (at >= 0) this.nodes.splice(at, 1);
    const admitted = this.admits(n);
    if (admitted) {
      let lo = 0;
      let hi = this.nodes.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (this.nodes[mid]!.index < n.index) lo = mid + 1;
        else hi = mid;
      }
      this.nodes.splice(lo, 0, n);
    }
    const top = this.top;
    if (top === null) return;
    const full = top.length === this.k;
    const was = top.indexOf(n);
    if (was >= 0) top.splice(was, 1);
    // Every node left out ranks after the last of the first k: n may take a place before it, else (when n was
    // among them and they were all of it) the k-th is unknown.
    const last = top[top.length - 1];
    if (admitted && (!full || (last !== undefined && this.before(n, last)))) {
      let i = 0;
      while (i < top.length && this.before(top[i]!, n)) i++;
      top.splice(i, 0, n);
      if (top.length > this.k) top.pop();
    } else if (was >= 0 && full) this.top = null;
  }
}

/** Whether s may give its copy of p to r, which holds a retained copy of it (s at `ds` from the mean, `dS` after). */
function givesRetained(tp: TickPlanner, p: number, s: NodeState, r: NodeState, ds: number, dS: number): boolean {
  const t = tp.ctx.config.threshold;
  return !((ds <= 0 && dS < -t) || !tp.st.stays(s) || tp.cooling(s) || tp.excluded(s) || tp.ctx.moved.get(p)?.has(s.index) || !tp.canReceive(p, r, s));
}

/**
 * A retained copy on r of a partition its owner should give: a follower move takes only followers, so the owner
 * first hands its role to a follower the owned and traffic bands allow, and its copy, a follower's then, moves on a
 * later tick (PD moves a leader's peer so: transfer the leader, then move the peer). Taken only where the best move
 * otherwise copies a partition whole: a returning node whose other retained copies were of partitions an overfull
 * node owns took a copy in full (31.8 MB in the settle bench's return, against a bound of 2.4 MB).
 */
function freedCopy(tp: TickPlanner, best: Candidate | null, p: number, r: NodeState): Candidate | null {
  const o = tp.st.owner[p]!;
  if (o < 0) return best;
  const s = tp.st.nodes[o]!;
  const ds = tp.dev(s);
  // Weighed as the follower's copy it becomes: the role's load goes to another holder, not off the pair's books.
  const dS = ds + tp.st.copyDelta(p, s, false, -1);
  if (!givesRetained(tp, p, s, r, ds, dS)) return best;
  const t = tp.ctx.config.threshold;
  let via: NodeState | undefined;
  let nearest = -Infinity;
  for (const f of tp.st.followers(p)) {
    const d = tp.st.nodes[f]!;
    if (!tp.st.stays(d) || d.suspended || tp.excluded(d) || tp.ctx.formerOwners.get(p)?.has(f) || !tp.meter.roleKeeps(p, s, d) || tp.stepCooldown(p, s, d) !== null) continue;
    // The role goes where it takes no node above the band, or above where the owner ends: two nodes above it traded
    // roles to free copies for nothing.
    if (tp.dev(d) + tp.st.roleDelta(p, d, 1) > Math.max(t, dS)) continue;
    const near = tp.meter.roleNearer(p, s, d);
    if (near > nearest) [via, nearest] = [d, near];
  }
  if (via === undefined) return best;
  const next = tp.better(best, p, s, r, ds, dS);
  return next === best || next === null ? best : { ...next, via };
}

/**
 * Owner handoffs to an admitted follower, once no follower move is in flight or proposed. Two reasons, each under
 * its two-sided band rule. The total score, where it is still outside the band (where no copy can move): owner
 * roles, the part of the load a handoff moves, go from a node above the mean to a follower below it, one of them
 * outside the band, while the pair's spread improves. Then owned partitions per capacity (`od`), with the totals
 * kept from spreading further. The bands are what done means: every handoff keeps the owned and traffic bands
 * (`roleKeeps`), and one that lowers the pair's excess outside them (`roleExcessFalls`) is made whatever the totals
 * say, with no margin. So no handoff is traded back: that excess never rises and falls with every such handoff, the
 * owned rule hands nothing back, as that would take a total out of the band again, and the total hands nothing past
 * the owned or traffic band.
 */
/** Sources picked per handoff without sorting every node: the search stops at the first with a candidate. */
const OWNER_SOURCES = 8;

/**
 * `items` in the order a stable sort by `key` (descending) gives: the first OWNER_SOURCES picked without sorting
 * them all, the rest sorted only if a search reads past them.
 */
function* byKeyDesc(items: NodeState[], key: Float64Array): Generator<NodeState> {
  const first = smallest(items, key, -1, OWNER_SOURCES);
  yield* first;
  if (first.length === items.length) return;
  yield* [...items].sort((a, b) => key[b.index]! - key[a.index]!).slice(OWNER_SOURCES);
}

function* inOrder(...groups: Iterable<NodeState>[]): Generator<NodeState> {
  for (const g of groups) yield* g;
}

export function balanceOwners(tp: TickPlanner): void {
  const t = tp.ctx.config.threshold;
  const mo = tp.st.meanOwned();
  if (mo <= 0) return;
  const od = (n: NodeState): number => tp.st.ownedDev(n, mo);
  const owned = new Float64Array(tp.st.nodes.length);
  const outside = new Uint8Array(tp.st.nodes.length);
  const followers: number[] = [];
  while (tp.free > 0) {
    const heavy = (n: NodeState): boolean => tp.dev(n) > t;
    const heavyOnes: NodeState[] = [];
    const others: NodeState[] = [];
    for (const n of tp.st.nodes) {
      if (!tp.st.stays(n) || tp.excluded(n)) continue;
      owned[n.index] = od(n);
      outside[n.index] = tp.meter.outsideRoleBands(n) ? 1 : 0;
      if (owned[n.index]! > -t || tp.dev(n) > 0) (heavy(n) ? heavyOnes : others).push(n);
    }
    if (heavyOnes.length + others.length === 0) return;
    // Heavy nodes first, the heaviest first; then by owned partitions.
    const sources = inOrder(byKeyDesc(heavyOnes, tp.devs), byKeyDesc(others, owned));
    let best = null as { p: number; s: NodeState; d: NodeState; imp: number; near: number; byTotal: boolean } | null;
    let held: string | null = null;
    for (const s of sources) {
      const a = od(s);
      const ts = tp.dev(s);
      for (const p of s.parts) {
        if (tp.st.owner[p] !== s.index) continue;
        // A pinned partition is weighed only to name its pin when it is what keeps a handoff from starting.
        const pinned = tp.pinned(p) && tp.movable(p);
        if (!pinned && !tp.partFree(p)) {
          // Named as what keeps a handoff from starting only where one is needed: the owner above the score's band or
          // outside its owned or traffic band. Inside them, an owned count above the threshold is the granularity of
          // whole owner roles (the demo's streams, which never move, left "nothing to do" naming one).
          if (!tp.touched.has(p) && (outside[s.index] === 1 || heavy(s))) held ??= `${tp.st.id(p)} owned by ${s.id} cannot be handed off: ${tp.whyBusy(p)}`;
          continue;
        }
        const count = tp.st.followersInto(p, followers);
        for (let k = 0; k < count; k++) {
          const f = followers[k]!;
          // `owned` holds every node that stays and is not excluded, the only followers weighed (checked next).
          const b = owned[f]!;
          const td = tp.dev(tp.st.nodes[f]!);
          // What the weighing below passes at all: a pair from above the mean to below it by the total, one of them
          // outside the band; a receiver below the mean in owned partitions, one of them outside the band; or a
          // node outside its owned or traffic band, which a handoff may mend. A balanced cluster has none of these,
          // and weighing its every owner role with every follower took most of a tick at 100,000 partitions.
          if (!(ts > 0 && td < 0 && tp.outsideBand(ts, td)) && !(b < 0 && tp.outsideBand(a, b)) && outside[s.index] === 0 && outside[f] === 0) continue;
          const d = tp.st.nodes[f]!;
          if (!tp.st.stays(d) || d.suspended || tp.excluded(d) || tp.ctx.formerOwners.get(p)?.has(f)) continue;
          // No handoff takes a node further outside the owned or traffic band, by the total score either: one that did,
          // a later handoff brought back, for ever (since zone shares, a zone's only node is no longer above the band
          // for holding what its zone must).
          if (!tp.meter.roleKeeps(p, s, d)) continue;
          // A pair whose excess outside those bands falls needs no margin, and is weighed whatever the totals say:
          // nothing trades that back (a joining node that owned nothing stayed so at a margin of 0.02).
          const mends = tp.meter.roleExcessFalls(p, s, d);
          const bAfter = b + 1 / (d.cap * mo);
          const after = Math.max(Math.abs(ts + tp.st.roleDelta(p, s, -1)), Math.abs(td + tp.st.roleDelta(p, d, 1)));
          let imp: number;
          let byTotal = false;
          if (ts > 0 && td < 0 && tp.outsideBand(ts, td)) {
            // The band rule of a follower move, on the total: from above the mean to below it, one of them outside.
            imp = Math.max(ts, -td) - after;
            byTotal = true;
          } else {
            // A handoff that mends the owned or traffic band is weighed whatever the owned counts say (a node at its
            // owned share may carry too many deliveries).
            if ((b >= 0 || !tp.outsideBand(a, b)) && !mends) continue;
            // A node below its owned band also takes from one at or below the mean that stays inside the band, as a
            // node joining pulls copies: the followers it has may all be of partitions such nodes own.
            if (a <= 0 && (a - 1 / (s.cap * mo) < -t || !tp.meter.ownsTooFew(d))) continue;
            imp = Math.max(a, -b) - Math.max(Math.abs(a - 1 / (s.cap * mo)), Math.abs(bAfter));
            // The totals must stay inside the band, or at least not spread further, nor does a node above the band pass
            // its owner roles to another that ends above it (they would move on), unless the bands are what it mends.
            if (!mends && after > Math.max(t, Math.abs(ts), Math.abs(td))) continue;
            if (!mends && heavy(s) && td + tp.st.roleDelta(p, d, 1) > t) continue;
          }
          if (!tp.improves(imp) && !mends) continue;
          if (pinned) {
            tp.pinHit ??= p;
            continue;
          }
          const cooled = tp.stepCooldown(p, s, d);
          if (cooled !== null) {
            held ??= cooled;
            continue;
          }
          // Nearest the shares in owner roles and deliveries first (see `nearer`); then the larger improvement; equal
          // ones (a heavy source bounds them all): the receiver owning the least, so owners spread too.
          const near = tp.meter.roleNearer(p, s, d);
          const nearBy = best === null ? 0 : near - best.near;
          if (best === null || nearBy > 1e-9 || (nearBy > -1e-9 && (imp > best.imp || (imp === best.imp && b < od(best.d))))) best = { p, s, d, imp, near, byTotal };
        }
      }
      if (best !== null) break;
    }
    if (best === null) {
      if (held !== null && tp.out.length === 0) tp.blocked ??= `no owner handoff can start: ${held}`;
      if (tp.pinHit !== null) tp.blocked ??= `no owner handoff may start${tp.pinNote()}`;
      return;
    }
    const { p, s, d, imp, byTotal } = best;
    const why = byTotal
      ? `${tp.side(s, tp.dev(s))} hands an owner role to ${tp.side(d, tp.dev(d))}, an admitted follower below the mean: their spread improves by ${f2(imp)}`
      : `${s.id} owns ${f2(od(s))} above the mean per capacity, ${d.id} (an admitted follower) ${f2(-od(d))} below: their owner spread improves by ${f2(imp)}`;
    tp.handoff(p, s, d, why);
  }
}
