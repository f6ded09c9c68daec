/**
 * Which follower copies are lost for good, so the loop replaces them ("lost follower replaced": step 0 on the
 * replacement, then the lost copy removed once the replacement covers the boundary; the step is repair.ts). Pure
 * rules over contract records, shared by the planner, `rebalancer status`, the dashboard and the metrics, so they
 * all call the same copies lost.
 */
import type { HistoryEntry, Node, Partition, Topology } from '../cluster/contract';

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
