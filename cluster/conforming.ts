/**
 * The contract's schema checked by hand for the reads that carry every partition (the topology and its changes) or
 * every node (which each move's read of its partition carries): zod takes about 0.4 s over 100,000 partitions, this a
 * tenth of it. It only says yes or no, to records that are
 * exactly what the schema accepts and returns unchanged; on a no, zod parses the same JSON and words the problem.
 * The client's reads and the snapshot check (planner/snapshot.ts) both take this path first.
 */
import { NODE_ID_PATTERN, PARTITION_ID_PATTERN, type NodesView, type Topology, type TopologyChanges, type TopologyPage } from './contract';

type Rec = Record<string, unknown>;

const isRec = (x: unknown): x is Rec => typeof x === 'object' && x !== null && !Array.isArray(x);
/** Exactly `n` keys: with every field checked present, no key the schema would strip. */
const keys = (r: Rec, n: number): boolean => Object.keys(r).length === n;
const count = (x: unknown): boolean => Number.isSafeInteger(x) && (x as number) >= 0;
const small = (x: unknown): boolean => Number.isInteger(x) && (x as number) >= 1 && (x as number) <= 16;
const rate = (x: unknown): boolean => typeof x === 'number' && Number.isFinite(x) && x >= 0;

/** The schema's checks: every field present (`downSince` aside) and no other key. */
class Conforming {
  private readonly nodeIds = new Set<string>();

  nodeId(x: unknown): boolean {
    if (typeof x !== 'string') return false;
    if (this.nodeIds.has(x)) return true;
    // Node ids repeat in every partition's copies and history: each distinct one meets the pattern once.
    if (!NODE_ID_PATTERN.test(x)) return false;
    this.nodeIds.add(x);
    return true;
  }

  nodeIdList(x: unknown): boolean {
    return Array.isArray(x) && x.every((id) => this.nodeId(id));
  }

  node(n: unknown): boolean {
    if (!isRec(n)) return false;
    const down = n.downSince;
    return (
      keys(n, down === undefined ? 9 : 10) &&
      this.nodeId(n.id) &&
      typeof n.processId === 'string' &&
      typeof n.storageInstance === 'string' &&
      typeof n.live === 'boolean' &&
      (down === undefined || down === null || count(down)) &&
      typeof n.capacity === 'number' &&
      n.capacity > 0 &&
      n.capacity <= 1000 &&
      typeof n.zone === 'string' &&
      rate(n.publishRate) &&
      rate(n.deliveryRate) &&
      typeof n.draining === 'boolean'
    );
  }

  partition(p: unknown): boolean {
    if (!isRec(p) || !keys(p, 19)) return false;
    const d = p.durability;
    const r = p.pendingRecovery;
    const b = p.boundary;
    return (
      typeof p.id === 'string' &&
      PARTITION_ID_PATTERN.test(p.id) &&
      (p.kind === 'queue' || p.kind === 'stream') &&
      this.nodeId(p.owner) &&
      this.nodeIdList(p.followers) &&
      this.nodeIdList(p.learners) &&
      (p.leaving === null || this.nodeId(p.leaving)) &&
      count(p.epoch) &&
      count(p.generation) &&
      small(p.replicationFactor) &&
      isRec(d) &&
      (d.mode === 'majority_durable' || d.mode === 'local_durable' ? keys(d, 1) : (d.mode === 'replica_durable' || d.mode === 'replica_accepted') && keys(d, 2) && small(d.n)) &&
      small(p.writeRequirement) &&
      Array.isArray(p.history) &&
      p.history.every(
        (h: unknown) => isRec(h) && keys(h, 4) && this.nodeId(h.node) && typeof h.processId === 'string' && typeof h.storageInstance === 'string' && typeof h.suspended === 'boolean',
      ) &&
      (r === null || (isRec(r) && keys(r, 4) && count(r.epoch) && count(r.openedAt) && typeof r.reason === 'string' && this.nodeId(r.failedOwner))) &&
      (p.admission === 'open' || p.admission === 'closed') &&
      (b === null ||
        (isRec(b) &&
          keys(b, b.swappedBack === undefined ? 4 : 5) &&
          count(b.offset) &&
          this.nodeId(b.joined) &&
          this.nodeId(b.leaving) &&
          count(b.epoch) &&
          (b.swappedBack === undefined || typeof b.swappedBack === 'boolean'))) &&
      Array.isArray(p.retainedCopies) &&
      p.retainedCopies.every(
        (c: unknown) => isRec(c) && keys(c, 5) && this.nodeId(c.node) && count(c.durableOffset) && count(c.removedAt) && count(c.retainedUntil) && count(c.bytesToCatchUp),
      ) &&
      count(p.historyBytes) &&
      rate(p.publishRate) &&
      rate(p.deliveryRate)
    );
  }
}

/** The fields a topology and its changes share, checked; `extra` more keys than those five. */
function conformingRead(json: unknown, extra: number, more: (r: Rec) => boolean): boolean {
  const c = new Conforming();
  const ok =
    isRec(json) &&
    keys(json, 5 + extra) &&
    typeof json.contractVersion === 'string' &&
    count(json.generation) &&
    count(json.now) &&
    Array.isArray(json.nodes) &&
    Array.isArray(json.partitions) &&
    more(json) &&
    json.nodes.every((n) => c.node(n)) &&
    json.partitions.every((p) => c.partition(p));
  if (ok) withDownSince(json.nodes as Rec[]);
  return ok;
}

/** The schema's default for a broker that predates the field. */
function withDownSince(nodes: Rec[]): void {
  for (const n of nodes) n.downSince ??= null;
}

/** `json` as the topology zod would return, when it passes the hand check; null when zod must judge it. */
export function conformingTopology(json: unknown): Topology | null {
  return conformingRead(json, 0, () => true) ? (json as Topology) : null;
}

/** `json` as the changes read zod would return, when it passes the hand check; null when zod must judge it. */
export function conformingChanges(json: unknown): TopologyChanges | null {
  const removed = (r: Rec): boolean => Array.isArray(r.removed) && r.removed.every((id) => typeof id === 'string' && PARTITION_ID_PATTERN.test(id));
  return conformingRead(json, 1, removed) ? (json as TopologyChanges) : null;
}

/** `json` as the topology page zod would return, when it passes the hand check; null when zod must judge it. */
export function conformingPage(json: unknown): TopologyPage | null {
  const next = (r: Rec): boolean => r.next === null || (typeof r.next === 'string' && PARTITION_ID_PATTERN.test(r.next));
  return conformingRead(json, 1, next) ? (json as TopologyPage) : null;
}

/** `json` as the nodes view zod would return, when it passes the hand check; null when zod must judge it. */
export function conformingNodes(json: unknown): NodesView | null {
  const c = new Conforming();
  const ok = isRec(json) && keys(json, 3) && count(json.generation) && count(json.now) && Array.isArray(json.nodes) && json.nodes.every((n) => c.node(n));
  if (!ok) return null;
  withDownSince(json.nodes as Rec[]);
  return json as NodesView;
}
