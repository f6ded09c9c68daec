/**
 * Checking a saved topology (`rebalancer plan --snapshot FILE`, the body of GET /v1/topology) before planning on
 * it: it must parse with the contract's schema and be consistent, or it is refused with the first problem found.
 */
import { conformingTopology } from '../cluster/conforming';
import { CONTRACT_VERSION, Topology } from '../cluster/contract';

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
