/** The drain step: every copy leaves a draining node, owner roles first. */
import type { NodeState } from './state';
import { f2, type TickPlanner } from './tick';

/**
 * Every copy leaves a draining node: owners by handoff to an admitted follower first, then follower moves. A
 * draining node that is down still sheds its follower copies (each move is then a replacement: the learner
 * copies from the owner, nothing is asked of the node); what it owns moves by ordinary recovery first.
 */
export function drain(tp: TickPlanner): void {
  for (const d of tp.st.nodes) {
    if (!d.draining || tp.ctx.drainedElsewhere.has(d.id)) continue;
    if (tp.excluded(d)) {
      tp.blocked ??= `drain of ${d.id}: ${d.id} is ${d.excluded}`;
      continue;
    }
    for (const p of [...d.parts]) {
      if (tp.free <= 0) return;
      if (tp.st.owner[p] !== d.index) continue;
      if (!d.live) {
        tp.blocked ??= `drain of ${d.id}: ${d.id} is down and owns ${tp.st.id(p)}: ordinary recovery moves its ownership first`;
        continue;
      }
      if (!tp.partFree(p)) {
        tp.blocked ??= `drain of ${d.id}: ${tp.st.id(p)} waits (${tp.whyBusy(p)})`;
        continue;
      }
      let best: NodeState | null = null;
      for (const f of tp.st.followers(p)) {
        const n = tp.st.nodes[f]!;
        if (!tp.st.stays(n) || n.suspended || tp.excluded(n) || tp.ctx.formerOwners.get(p)?.has(f)) continue;
        if (best === null || tp.dev(n) < tp.dev(best)) best = n;
      }
      if (best === null) {
        tp.blocked ??= `drain of ${d.id}: ${tp.st.id(p)} has no admitted follower off draining or dead nodes to take ownership`;
        continue;
      }
      tp.handoff(p, d, best, `drain ${d.id}: owner handed to ${best.id}, its admitted follower with the lowest score (${f2(tp.st.steady(best))})`);
    }
    for (const p of [...d.parts]) {
      if (tp.free <= 0) return;
      if (tp.st.owner[p] === d.index || !tp.st.isFollower(p, d.index)) continue;
      if (!tp.partFree(p)) {
        tp.blocked ??= `drain of ${d.id}: ${tp.st.id(p)} waits (${tp.whyBusy(p)})`;
        continue;
      }
      const to = drainTarget(tp, p, d);
      if (to === null) {
        tp.blocked ??= `drain of ${d.id}: no node can take ${tp.st.id(p)} now (transfer limits, zones, copies already there)`;
        continue;
      }
      tp.followerMove(p, d, to, `drain ${d.id}: ${to.id} has the lowest score that can take it (${f2(tp.recvDev(to) + tp.st.mean)})`);
    }
  }
}

/**
 * The least loaded node that may take a new copy of p in place of the one on d, a draining or a lost node: in a
 * zone holding the fewest of p's other copies among those that could take one (`canAdd`), so zones narrow where
 * the copy goes, never whether. A retained copy wins when taking it keeps the node within the threshold.
 */
export function drainTarget(tp: TickPlanner, p: number, d: NodeState): NodeState | null {
  const fits = (r: NodeState) => tp.canAdd(p, r, d);
  const t = tp.ctx.config.threshold;
  for (const rn of tp.st.retainedAt(p)?.keys() ?? []) {
    const r = tp.st.nodes[rn]!;
    if (tp.receiverOk(r) && fits(r) && tp.recvDev(r) + tp.st.copyDelta(p, r, false, 1) <= t) return r;
  }
  let best: NodeState | null = null;
  for (const r of tp.st.nodes) {
    if (!tp.receiverOk(r) || !fits(r)) continue;
    if (best === null || tp.recvDev(r) < tp.recvDev(best)) best = r;
  }
  return best;
}
