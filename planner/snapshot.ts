/**
 * Checking a saved topology (`rebalancer plan --snapshot FILE`, the body of GET /v1/topology) before planning on
 * it: it must parse with the contract's schema and be consistent, or it is refused with the first problem found.
 */
import { CONTRACT_VERSION, NODE_ID_PATTERN, PARTITION_ID_PATTERN, Topology } from '../cluster/contract';

export type SnapshotCheck = { ok: true; topology: Topology } | { ok: false; problem: string };

/** The first inconsistency of a parsed topology, in words, or null. */
export function topologyProblem(t: Topology): string | null {
  if (t.contractVersion !== CONTRACT_VERSION)
    return `contractVersion is "${t.contractVersion}": this planner reads contract version ${CONTRACT_VERSION}`;
  const nodes = new Set<string>();
  for (const n of t.nodes) {
    if (nodes.has(n.id)) return `node ${n.id} is listed twice`;
    nodes.add(n.id);
  }
  const parts = new Set<string>();
  for (const p of t.partitions) {
    const at = `partition ${p.id}`;
    if (parts.has(p.id)) return `${at} is listed twice`;
    parts.add(p.id);
    if (!nodes.has(p.owner)) return `${at}: owner ${p.owner} is not a listed node`;
    const roles: [string, string[]][] = [
      ['follower', p.followers],
      ['learner', p.learners],
      ['leaving replica', p.leaving === null ? [] : [p.leaving]],
    ];
    const seen = new Map<string, string>([[p.owner, 'owner']]);
    for (const [role, ids] of roles) {
      for (const id of ids) {
        if (!nodes.has(id)) return `${at}: ${role} ${id} is not a listed node`;
        const before = seen.get(id);
        if (before === 'owner') return `${at}: the owner ${id} is also listed as a ${role}`;
        if (before !== undefined) return `${at}: ${id} holds two copies (${before} and ${role})`;
        seen.set(id, role);
      }
    }
    for (const h of p.history) if (!nodes.has(h.node)) return `${at}: history entry ${h.node} is not a listed node`;
    for (const r of p.retainedCopies) if (!nodes.has(r.node)) return `${at}: retained copy on ${r.node}, not a listed node`;
  }
  return null;
}

type Rec = Record<string, unknown>;

const isRec = (x: unknown): x is Rec => typeof x === 'object' && x !== null && !Array.isArray(x);
/** Exactly `n` keys: with every field checked present, no key the schema would strip. */
const keys = (r: Rec, n: number): boolean => Object.keys(r).length === n;
const count = (x: unknown): boolean => Number.isSafeInteger(x) && (x as number) >= 0;
const small = (x: unknown): boolean => Number.isInteger(x) && (x as number) >= 1 && (x as number) <= 16;
const rate = (x: unknown): boolean => typeof x === 'number' && Number.isFinite(x) && x >= 0;

/**
 * The schema's checks by hand, for the common case: zod takes about 0.4 s over 100,000 partitions, this a tenth of
 * it. It only says yes or no, to records that are exactly what the schema accepts and returns unchanged (every
 * field present, `downSince` aside, and no other key); on a no, zod parses the same JSON and words the problem,
 * so a bad snapshot is refused as it always was.
 */
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

/** `json` as the topology zod would return, when it passes the hand check; null when zod must judge it. */
export function conformingTopology(json: unknown): Topology | null {
  const c = new Conforming();
  const ok =
    isRec(json) &&
    keys(json, 5) &&
    typeof json.contractVersion === 'string' &&
    count(json.generation) &&
    count(json.now) &&
    Array.isArray(json.nodes) &&
    Array.isArray(json.partitions) &&
    json.nodes.every((n) => c.node(n)) &&
    json.partitions.every((p) => c.partition(p));
  if (!ok) return null;
  // The schema's default for a broker that predates the field.
  for (const n of json.nodes as Rec[]) n.downSince ??= null;
  return json as unknown as Topology;
}

/** Parses a snapshot's text: JSON, then the contract's schema, then consistency. */
export function checkSnapshot(text: string): SnapshotCheck {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    return { ok: false, problem: `not JSON: ${(err as Error).message}` };
  }
  let topology = conformingTopology(json);
  if (topology === null) {
    const parsed = Topology.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const path = issue.path.length > 0 ? issue.path.join('.') : 'the document';
      return { ok: false, problem: `${path}: ${issue.message} (expected the body of GET /v1/topology)` };
    }
    topology = parsed.data;
  }
  const problem = topologyProblem(topology);
  return problem === null ? { ok: true, topology } : { ok: false, problem };
}
