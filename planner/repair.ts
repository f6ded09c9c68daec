/**
 * Self-healing: which follower copies are lost for good, so the loop replaces them ("lost follower replaced":
 * step 0 on the replacement, then the lost copy removed once the replacement covers the boundary), and the repair
 * step of a tick. Pure rules over contract records, shared by the planner, `rebalancer status`, the dashboard and
 * the metrics, so they all call the same copies lost.
 */
import type { HistoryEntry, Node, Partition, Topology } from '../cluster/contract';
import type { TickPlanner } from './policy';

/**
 * Why the follower copy of `node` is lost for good, or null. How long the node has been down is the broker's
 * (`downSince`, on the broker clock `now`), never when a client noticed. A node down with its disk lost (its
 * storage instance no longer the one the accepted history names) is replaced at once: its copy holds nothing,
 * so waiting for it to return gains nothing, as it would copy the whole history back as a learner anyway,
 * while the partition runs a copy short. A live node's copy is never lost: a restarted follower rejoins by
 * itself through learner admission. `replaceAfterMs` 0 turns repair off.
 */
export function lostReason(node: Node, entry: HistoryEntry | undefined, now: number, replaceAfterMs: number): string | null {
  if (replaceAfterMs <= 0 || node.live) return null;
  if (entry !== undefined && entry.storageInstance !== node.storageInstance) return `${node.id} is down with its disk lost`;
  const since = node.downSince ?? null;
  if (since !== null && now - since >= replaceAfterMs) {
    return `${node.id} has been down ${Math.round((now - since) / 1000)} s, longer than ${Math.round(replaceAfterMs / 1000)} s`;
  }
  return null;
}

/** Copies that count now: the owner and the followers on live nodes that are not suspended. */
export function liveCopies(p: Partition, nodes: ReadonlyMap<string, Node>): number {
  const suspended = new Set(p.history.filter((h) => h.suspended).map((h) => h.node));
  const counts = (id: string) => nodes.get(id)?.live === true && !suspended.has(id);
  return (counts(p.owner) ? 1 : 0) + p.followers.filter(counts).length;
}

export interface UnderReplicated {
  partition: string;
  replicationFactor: number;
  liveCopies: number;
  /** Follower copies lost for good, each with why: what the loop replaces. */
  lost: { node: string; reason: string }[];
  /** The replacement running on the partition (the loop's or an operator's), or null. */
  repair: { lost: string; to: string } | null;
}

/**
 * Queue partitions with fewer counted live copies than their replication factor, the fewest first, each with the
 * replacement running on it among `repairs` (replacements in flight: partition, lost copy, new copy).
 */
export function underReplicated(t: Topology, replaceAfterMs: number, repairs: readonly { partition: string; from: string | null; to: string }[] = []): UnderReplicated[] {
  const nodes = new Map(t.nodes.map((n) => [n.id, n]));
  const out: UnderReplicated[] = [];
  for (const p of t.partitions) {
    const live = liveCopies(p, nodes);
    if (live >= p.replicationFactor) continue;
    const lost: UnderReplicated['lost'] = [];
    for (const f of p.followers) {
      const n = nodes.get(f);
      const reason = n === undefined ? null : lostReason(n, p.history.find((h) => h.node === f), t.now, replaceAfterMs);
      if (reason !== null) lost.push({ node: f, reason });
    }
    const running = repairs.find((r) => r.partition === p.id);
    const repair = running === undefined ? null : { lost: running.from ?? '', to: running.to };
    out.push({ partition: p.id, replicationFactor: p.replicationFactor, liveCopies: live, lost, repair });
  }
  return out.sort((a, b) => a.liveCopies - b.liveCopies);
}

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
      tp.blocked ??= `repair of ${st.id(p)} (${why}) waits: ${held}`;
      continue;
    }
    const busy = st.busy[p];
    if (busy !== null) {
      tp.blocked ??= `repair of ${st.id(p)} (${why}) waits: ${busy}`;
      continue;
    }
    const to = tp.drainTarget(p, l, (r) => tp.canAdd(p, r, l));
    if (to === null) {
      tp.blocked ??= `repair of ${st.id(p)} (${why}): no node can take a new copy now (transfer limits, zones, copies already there)`;
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
