/** The band step: follower moves that bring nodes into their bands once the score's own moves are done. */
import { smallest } from './balance';
import { bandOf, bandWords, dimensionReport, MOVED, shareDeviation } from './bands';
import type { ClusterState, NodeState } from './state';
import { NEAR_TOLERANCE, type TickPlanner } from './tick';
import type { Bands } from './types';

/** Sources and receivers weighed per proposal by the band step: the furthest from their shares. */
const BAND_NODES = 8;

interface BandCandidate {
  p: number;
  s: NodeState;
  r: NodeState;
  gain: number;
  bytes: number;
  /** `BandMeter.bandFit`, 0 at best. */
  near: number;
}

/**
 * The band step, after the score's own moves: follower moves that bring nodes into their bands in replicas, disk
 * and traffic. A move must lower the summed excess of its two nodes by at least minImprovement, so no move is
 * traded back, and may not take either node's score further from the mean than the threshold or where it was, so
 * the score's moves never undo it. Fewest bytes per unit of excess removed first, as the score's moves do. What
 * stays outside a band when no move serves it is named, with its node and dimension.
 */
export function balanceBands(tp: TickPlanner): void {
  const st = tp.st;
  const bands = tp.meter.bands;
  const meter = tp.meter;
  const { threshold: t, minImprovement } = tp.ctx.config;
  const above = new Float64Array(st.nodes.length);
  const below = new Float64Array(st.nodes.length);
  const exc = new Float64Array(st.nodes.length);
  while (tp.free > 0) {
    // Most ticks find every node inside: that is known before measuring how far each is from its shares.
    let anyOutside = false;
    for (const n of st.nodes) {
      if (!st.stays(n)) continue;
      exc[n.index] = meter.copyExcess(n);
      if (exc[n.index]! > 0) anyOutside = true;
    }
    if (!anyOutside) return;
    const sources: NodeState[] = [];
    const receivers: NodeState[] = [];
    // Nodes outside a band below their share that only their transfer limit keeps from receiving. A source one of
    // them holds retained copies of sheds to it once it has a slot: a copy that costs bytes does not go now to a
    // node inside its bands (at a rejoin, a whole copy where the returning node's retained one would have served).
    const waiting: NodeState[] = [];
    for (const n of st.nodes) {
      if (!st.stays(n)) continue;
      above[n.index] = meter.beyond(n, -1);
      below[n.index] = meter.beyond(n, 1);
      if (above[n.index]! > 0 && !tp.cooling(n) && !tp.excluded(n)) sources.push(n);
      if (below[n.index]! > 0 && tp.receiverOk(n)) receivers.push(n);
      else if (below[n.index]! > 0 && exc[n.index]! > 0 && tp.onlyBusy(n)) waiting.push(n);
    }
    let deferredFor: NodeState | null = null;
    const rs = furthest(receivers, below, exc);
    // A copy's gain is at most what its source loses plus the most excess a receiver has: below the margin, no
    // receiver is weighed (on a large cluster, most copies).
    let mostExcess = 0;
    for (const r of rs) mostExcess = Math.max(mostExcess, exc[r.index]!);
    let best: BandCandidate | null = null;
    for (const s of furthest(sources, above, exc)) {
      const ds = tp.dev(s);
      // The waiting node holding retained copies of s's, asked once per source: it depends on neither copy nor receiver.
      let waitsFor: NodeState | null | undefined;
      for (const p of s.parts) {
        if (st.owner[p] === s.index || !st.isFollower(p, s.index) || tp.ctx.moved.get(p)?.has(s.index)) continue;
        if (!tp.partFree(p)) {
          tp.notePinned(p);
          continue;
        }
        // A copy that fits the source worse than the best so far fits no pair better (`bandSourceFit`).
        if (best !== null && meter.bandSourceFit(p, s) < best.near - NEAR_TOLERANCE) continue;
        const dS = ds + st.copyDelta(p, s, false, -1);
        if (Math.abs(dS) > Math.max(t, Math.abs(ds))) continue;
        const lose = exc[s.index]! - meter.copyExcess(s, p, -1);
        const sourceAfter = exc[s.index]! - lose;
        if (lose + mostExcess < minImprovement && sourceAfter > 0) continue;
        for (const r of rs) {
          if (r.index === s.index) continue;
          // The fit first: it is cheap, and a copy that fits worse than the best so far loses before the costlier
          // checks (a step held back or deferred here is named only when no copy is proposed, so none is missed).
          const near = meter.bandFit(p, s, r);
          if (best !== null && near < best.near - NEAR_TOLERANCE) continue;
          const receiverAfter = meter.copyExcess(r, p, 1);
          const gain = lose + exc[r.index]! - receiverAfter;
          // The margin, or a move that takes neither node further outside any band: the excess outside the bands
          // only falls, so nothing can trade it back (that would raise it again) and no margin is needed. A node a
          // hair outside is brought in, and an empty one fills whatever the margin (0.1 once moved nothing).
          const clears = gain > 0 && sourceAfter <= exc[s.index]! && receiverAfter <= exc[r.index]!;
          if ((gain < minImprovement && !clears) || (exc[s.index] === 0 && exc[r.index] === 0)) continue;
          const dr = tp.dev(r);
          if (Math.abs(dr + st.copyDelta(p, r, false, 1)) > Math.max(t, Math.abs(dr)) || !tp.keepsBands(p, s, r) || !tp.canReceive(p, r, s)) continue;
          const cooled = tp.stepCooldown(p, s, r);
          if (cooled !== null) {
            tp.hold(cooled);
            continue;
          }
          const bytes = st.bytesTo(p, r.index);
          if (bytes >= st.bytes[p]! && tp.awaitingFreed.has(r.index)) continue;
          if (exc[r.index] === 0 && bytes > 0 && waiting.length > 0) {
            waitsFor ??= waiting.find((n) => retainsFrom(tp, s, n)) ?? null;
            if (waitsFor !== null) {
              deferredFor ??= waitsFor;
              continue;
            }
          }
          if (best === null || near > best.near + NEAR_TOLERANCE || (near >= best.near - NEAR_TOLERANCE && cheaper(bytes, gain, best))) best = { p, s, r, gain, bytes, near };
        }
      }
    }
    if (best === null) {
      // Which node and dimension, only once it is the idle reason (`bandsIdleReason`): reporting every band each tick
      // cost a tenth of a plan at scale.
      const why = deferredFor
        ? `the moves left copy bytes to nodes inside their bands: they wait for ${deferredFor.id}, below its band, to have a transfer slot (${deferredFor.inbound} of ${tp.ctx.config.maxTransfersPerNode} in use)`
        : tp.held === null
          ? 'no follower move brings it closer within the score band, zone, cooldown and transfer limit rules'
          : `no follower move can start: ${tp.held}`;
      tp.bandsBlocked = `${why}${tp.pinNote()}`;
      return;
    }
    const { p, s, r, gain } = best;
    const words = (n: NodeState) => dimensionWords(st, bands, n);
    tp.followerMove(p, s, r, `bands: ${s.id} (${words(s)}) sheds to ${r.id} (${words(r)}): their excess outside the bands falls by ${gain.toFixed(3)}`);
  }
}

/** `w` holds a retained copy of a follower copy on `s` that may move to it: `s` can shed to `w` for less than a whole copy. */
function retainsFrom(tp: TickPlanner, s: NodeState, w: NodeState): boolean {
  const st = tp.st;
  return s.parts.some((p) => st.retainedAt(p)?.has(w.index) === true && st.owner[p] !== s.index && tp.partFree(p) && tp.canReceive(p, w, s));
}

/**
 * The BAND_NODES of `items` outside a band first, then the rest, each group the furthest from its shares (`side`)
 * first, in the order of `items` where equal: the order a stable sort would give, without sorting them all.
 */
function furthest(items: NodeState[], side: Float64Array, exc: Float64Array): NodeState[] {
  const out = smallest(items.filter((n) => exc[n.index]! > 0), side, -1, BAND_NODES);
  if (out.length === BAND_NODES) return out;
  return out.concat(smallest(items.filter((n) => !(exc[n.index]! > 0)), side, -1, BAND_NODES - out.length));
}

/** Fewer bytes per unit of excess removed; within a tenth of each other, the larger gain (fewer moves). */
function cheaper(bytes: number, gain: number, best: BandCandidate): boolean {
  const mine = bytes * best.gain;
  const theirs = best.bytes * gain;
  if (mine < 0.9 * theirs) return true;
  if (mine > 1.1 * theirs) return false;
  return gain > best.gain;
}

/** A node's deviation from its share in each dimension a follower copy moves: "replicas +14%, disk -31%, traffic +2%". */
function dimensionWords(st: ClusterState, bands: Bands, n: NodeState): string {
  return MOVED.map((d) => {
    return `${d} ${shareDeviation(bandOf(st, bands, n, d)) ?? 'n/a'}`;
  }).join(', ');
}

/** The node and dimension the band step left outside its band, and why, or null: the idle reason once nothing else is. */
export function bandsIdleReason(tp: TickPlanner): string | null {
  if (tp.bandsBlocked === null) return null;
  const worst = dimensionReport(tp.st, tp.meter.bands).find((r) => !r.inside && r.dimension !== 'owned');
  return worst === undefined ? null : `${bandWords(worst)}: ${tp.bandsBlocked}`;
}
