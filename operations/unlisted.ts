/**
 * The partitions a tick holds because Temporal's list of closes may not know yet what changed them. A tick waits for
 * that list only as long as its broker reads take (`listedWithin`), so it may plan with a list begun a tick or more
 * before its topology: an operator's move that completed in between shows in the topology, with no cooldown for it
 * in the book yet, and the plan could undo it. Every partition whose record changed since the topology read at the
 * start of the newest list is held for that tick; the list under way lists its close for the next.
 */
import type { Topology } from '../cluster/contract';
import { placesOf, replacedSince } from '../cluster/derived';

/** Topologies kept per task queue: a list still under way after this many ticks holds every partition until it lists. */
const KEPT = 8;

export class UnlistedChanges {
  /** Recent ticks' topologies, oldest first, each with when its read began (epoch ms). */
  private readonly reads: { at: number; topology: Topology }[] = [];

  /** A tick's topology, whose read began at `at`, before the tick's list began. */
  read(at: number, topology: Topology): void {
    this.reads.push({ at, topology });
    if (this.reads.length > KEPT) this.reads.shift();
  }

  /**
   * The partitions of `now` whose record changed since the newest topology read that began at or before `listedFrom`
   * (when the newest list that listed began): what that list cannot have listed the close of. Every partition when no
   * kept read is that old, or nothing listed yet.
   */
  since(listedFrom: number | null, now: Topology): string[] {
    const before = listedFrom === null ? undefined : this.reads.findLast((r) => r.at <= listedFrom)?.topology;
    if (before === undefined) return now.partitions.map((p) => p.id);
    return changedBetween(before, now);
  }
}

/**
 * Ids of the partitions of `after` that `before` does not hold at the same record generation: of the records the model
 * replaced between the two when it carried one into the other (cluster/derived.ts), else of every record.
 */
export function changedBetween(before: Topology, after: Topology): string[] {
  if (before.partitions === after.partitions) return [];
  const replaced = replacedSince(before.partitions, after.partitions);
  if (replaced !== null) {
    // Carried: the same records in the same places but for those replaced.
    const at = placesOf(after.partitions);
    const places = [...replaced].map((id) => at.get(id)!).sort((a, b) => a - b);
    return places.filter((i) => before.partitions[i]!.generation !== after.partitions[i]!.generation).map((i) => after.partitions[i]!.id);
  }
  const at = before.partitions;
  let byId: Map<string, number> | null = null;
  const changed: string[] = [];
  after.partitions.forEach((p, i) => {
    // The records keep their order from read to read unless partitions were created or deleted.
    let old = at[i];
    if (old?.id !== p.id) old = at[(byId ??= new Map(at.map((q, k) => [q.id, k]))).get(p.id) ?? -1];
    if (old?.generation !== p.generation) changed.push(p.id);
  });
  return changed;
}
