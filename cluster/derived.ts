/**
 * What is derived of the model's partition lists, kept per list and carried from a list to the next one a changes
 * read or a page makes, so the loop's tick pays for what changed rather than for 100,000 records: each record's
 * place by id, the records not at rest (the loop's snapshot reads the moves in flight and the recovery pause from
 * them, rules/rebalancer-rules.ts) and which records a carry replaced. Records not at rest are derived only of the
 * lists the model handed out (`seal`): nothing changes those in place, so what was derived of one stays true.
 */
import type { Partition } from './contract';

type List = readonly Partition[];

const sealed = new WeakSet<List>();
const places = new WeakMap<List, Map<string, number>>();
const restless = new WeakMap<List, Map<string, Partition>>();

/** A list the model hands out: never changed in place from now on. */
export function seal(partitions: List): void {
  sealed.add(partitions);
}

/** Each record's place in the list by id, built once per list (or carried). */
export function placesOf(partitions: List): Map<string, number> {
  let at = places.get(partitions);
  if (at === undefined) {
    at = new Map(partitions.map((p, i) => [p.id, i]));
    places.set(partitions, at);
  }
  return at;
}

/** At rest: no copy being added or leaving, admission open, no recovery pending. */
export function atRest(p: Partition): boolean {
  return p.learners.length === 0 && p.leaving === null && p.admission === 'open' && p.pendingRecovery === null;
}

/**
 * The records of a sealed list not at rest, and those of the ids in `also`, in the list's order; null for a list not
 * sealed (pass over it whole).
 */
export function notAtRest(partitions: List, also: Iterable<string> = []): Partition[] | null {
  if (!sealed.has(partitions)) return null;
  let found = restless.get(partitions);
  if (found === undefined) {
    found = new Map();
    for (const p of partitions) if (!atRest(p)) found.set(p.id, p);
    restless.set(partitions, found);
  }
  const at = placesOf(partitions);
  const records = new Map(found);
  for (const id of also) {
    const i = at.get(id);
    if (i !== undefined) records.set(id, partitions[i]!);
  }
  return [...records.values()].sort((a, b) => at.get(a.id)! - at.get(b.id)!);
}

/**
 * Each carried list's serial, and for the most recent carries the list it came from and the ids of the records it
 * replaced: which records differ between two lists of one line, without a pass over either.
 */
let serials = 0;
const serialOf = new WeakMap<List, number>();
const lineage = new Map<number, { parent: number; ids: string[] }>();
/** Carries remembered: a tick makes a few changes reads and pages, and the oldest topology kept is 8 ticks back. */
const LINEAGE = 1_024;

const serial = (partitions: List): number => {
  let n = serialOf.get(partitions);
  if (n === undefined) serialOf.set(partitions, (n = ++serials));
  return n;
};

/**
 * `next` is `prev` with `replaced` records in the places of their ids, none added or removed: each place stays, and
 * the records not at rest are `prev`'s with the replaced ones judged again.
 */
export function carry(prev: List, next: List, replaced: readonly Partition[]): void {
  const at = places.get(prev);
  if (at !== undefined) places.set(next, at);
  lineage.set(serial(next), { parent: serial(prev), ids: replaced.map((p) => p.id) });
  if (lineage.size > LINEAGE) lineage.delete(lineage.keys().next().value!);
  const was = restless.get(prev);
  if (was === undefined) return;
  const found = new Map(was);
  for (const p of replaced) {
    if (atRest(p)) found.delete(p.id);
    else found.set(p.id, p);
  }
  restless.set(next, found);
}

/** The ids of the records replaced on the way from `before` to `after`; null when `after` was not carried from it. */
export function replacedSince(before: List, after: List): Set<string> | null {
  const from = serialOf.get(before);
  let at: number | undefined = serialOf.get(after);
  if (from === undefined || at === undefined) return null;
  const ids = new Set<string>();
  while (at !== from) {
    const link: { parent: number; ids: string[] } | undefined = at < from ? undefined : lineage.get(at);
    if (link === undefined) return null;
    for (const id of link.ids) ids.add(id);
    at = link.parent;
  }
  return ids;
}
