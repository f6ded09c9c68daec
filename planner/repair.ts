/** The repair step of a tick: a replacement for each copy lost for good (lost.ts says which). */
import { drainTarget } from './drain';
import type { TickPlanner } from './tick';

/** How a tick's idle reason begins when a repair of `partition` is what held it (status finds it by this). */
export const repairHeldWords = (partition: string): string => `repair of ${partition} (`;

/**
 * Repair before balance: each partition with a lost copy gets a replacement on the node a follower move would
 * choose (a retained copy first, else the least loaded node that may take it: live, staying, not rejoining, a
 * transfer slot free, in a zone holding no more of the partition than any other that could: `canAdd`), partitions
 * with the fewest live copies first. The
 * replacement only adds a copy before the lost one goes, so no partition falls further below its replication
 * factor than the loss took it. Partition cooldowns do not hold a repair back (they keep load from
 * oscillating; a missing copy is not load); a partition with a change in flight waits for it, as does one an
 * operator pinned or whose lost copy is on a node an operator excluded. A copy on a draining node is left to its
 * drain.
 */
export function repair(tp: TickPlanner): void {
  const st = tp.st;
  const order = [...st.lost].sort((a, b) => a.live - b.live);
  for (const { p, node, why, live, rf } of order) {
    if (tp.free <= 0) return;
    const l = st.nodes[node]!;
    // Already replaced earlier in the plan (planToConvergence reads the topology once), or left to a drain.
    if (l.draining || tp.touched.has(p) || !st.holds(p, node)) continue;
    // An operator's pin or exclusion keeps the loop off the partition or the node, a repair included.
    const held = st.pins.get(p) ?? (tp.excluded(l) ? `${l.id} is ${l.excluded}` : null);
    if (held !== null) {
      tp.blocked ??= `${repairHeldWords(st.id(p))}${why}) waits: ${held}`;
      continue;
    }
    const busy = st.busy[p];
    if (busy !== null) {
      tp.blocked ??= `${repairHeldWords(st.id(p))}${why}) waits: ${busy}`;
      continue;
    }
    const to = drainTarget(tp, p, l);
    if (to === null) {
      tp.blocked ??= `${repairHeldWords(st.id(p))}${why}): no node can take a new copy now (transfer limits, zones, copies already there)`;
      continue;
    }
    const bytes = st.bytesTo(p, to.index);
    st.replaceCopy(p, node, to.index);
    st.addTransfer(to.index, null, bytes);
    tp.remember(tp.ctx.moved, p, node, to.index);
    tp.touched.add(p);
    tp.free--;
    tp.out.push({
      op: 'follower_replace',
      partition: st.id(p),
      from: l.id,
      to: to.id,
      bytes,
      reason: `repair: ${why}; ${st.id(p)} has ${live} of ${rf} copies live, ${to.id} takes a new one (score ${(tp.recvDev(to) + st.mean).toFixed(3)})`,
    });
    tp.refresh(l, to);
  }
}
