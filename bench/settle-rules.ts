/**
 * The pure parts of `npm run bench -- settle` (bench/settle.ts): when a cluster is settled, the transfer bound of
 * a trigger, and what a sample of the running product was waiting on. Functions over a topology snapshot, the
 * planner's scores and plans, and the loop's status; no I/O.
 */
import type { Partition, Topology } from '../cluster/contract';
import type { NodeScore, PlannerConfig, Proposal } from '../planner';

/** What keeps a partition's copies from being at rest: a learner, a leaving copy, a closed admission, a recovery. */
export function inFlightOf(p: Partition): string[] {
  const out = p.learners.map((n) => `${p.id}: learner on ${n}`);
  if (p.leaving !== null) out.push(`${p.id}: ${p.leaving} leaving`);
  if (p.boundary !== null || p.admission !== 'open') out.push(`${p.id}: a reconfiguration holds admission or a boundary`);
  if (p.pendingRecovery !== null) out.push(`${p.id}: pending recovery`);
  return out;
}

/**
 * Settled, as the benchmark's target reads it: nothing in flight (no learner, no leaving copy, no closed
 * admission or pending recovery, no reconfiguration running), every owner and follower on a live node that is not
 * draining, and every live node that is not draining inside the band (|score - mean| <= threshold), but for the
 * nodes in `bound`: those the planner, at rest, names as held above the band by the zone rule (`zoneBoundNodes`),
 * where what is left is what their zone must hold. Returns every reason it is not settled, the farthest node from
 * the mean first among the band's.
 */
export function unsettledReasons(
  topology: Topology,
  scores: { mean: number; nodes: NodeScore[] },
  threshold: number,
  running: number,
  bound: ReadonlySet<string> = new Set(),
): string[] {
  const why: string[] = [];
  if (running > 0) why.push(`${running} reconfiguration(s) running`);
  const live = new Set(topology.nodes.filter((n) => n.live).map((n) => n.id));
  const draining = new Set([...topology.nodes.filter((n) => n.draining).map((n) => n.id), ...scores.nodes.filter((n) => n.draining).map((n) => n.node)]);
  for (const p of topology.partitions) {
    why.push(...inFlightOf(p));
    for (const id of [p.owner, ...p.followers]) {
      if (!live.has(id)) why.push(`${p.id}: copy on ${id}, which is down`);
      else if (draining.has(id)) why.push(`${p.id}: copy on ${id}, which is draining`);
    }
  }
  const off = scores.nodes.filter((n) => n.live && !draining.has(n.node)).map((n) => ({ node: n.node, off: n.total - scores.mean }));
  for (const n of off.sort((a, b) => Math.abs(b.off) - Math.abs(a.off))) {
    if (n.off > 0 && bound.has(n.node)) continue;
    if (Math.abs(n.off) > threshold + 1e-9) why.push(`${n.node} is ${n.off.toFixed(3)} off the mean (band ${threshold})`);
  }
  return why;
}

/** The node that must receive the most bytes in `steps` (handoffs copy nothing), and how many. */
export function busiestReceiver(steps: readonly Pick<Proposal, 'op' | 'to' | 'bytes'>[]): { node: string | null; bytes: number } {
  const inbound = new Map<string, number>();
  for (const s of steps) if (s.op !== 'owner_handoff') inbound.set(s.to, (inbound.get(s.to) ?? 0) + s.bytes);
  let best: { node: string | null; bytes: number } = { node: null, bytes: 0 };
  for (const [node, bytes] of inbound) if (bytes > best.bytes) best = { node, bytes };
  return best;
}

/** The transfer bound: the busiest receiver's bytes over the sync rate a node receives at, in ms. */
export function transferBoundMs(steps: readonly Pick<Proposal, 'op' | 'to' | 'bytes'>[], syncBytesPerSec: number): number {
  return (1000 * busiestReceiver(steps).bytes) / syncBytesPerSec;
}

/**
 * Copies to make for the copies a lost node held (its owned ones become followers elsewhere after recovery): each,
 * largest first, onto the live node that is not draining, does not hold the partition and has received the fewest
 * bytes so far, a zone the partition's other copies lack first. The planner does not plan repairs, so the
 * transfer bound of a loss is this plan's busiest receiver.
 */
export function repairSteps(topology: Topology, lost: string): Proposal[] {
  const zone = new Map(topology.nodes.map((n) => [n.id, n.zone]));
  const targets = topology.nodes.filter((n) => n.live && !n.draining && n.id !== lost);
  const received = new Map(targets.map((n) => [n.id, 0]));
  const steps: Proposal[] = [];
  const held = topology.partitions.filter((p) => p.owner === lost || p.followers.includes(lost)).sort((a, b) => b.historyBytes - a.historyBytes);
  for (const p of held) {
    const others = [p.owner, ...p.followers, ...p.learners].filter((n) => n !== lost);
    const zones = new Set(others.map((n) => zone.get(n)));
    const candidates = targets.filter((n) => !others.includes(n.id));
    const pick = candidates.sort((a, b) => Number(zones.has(a.zone)) - Number(zones.has(b.zone)) || received.get(a.id)! - received.get(b.id)!)[0];
    if (pick === undefined) continue;
    received.set(pick.id, received.get(pick.id)! + p.historyBytes);
    steps.push({ op: 'follower_move', partition: p.id, from: lost, to: pick.id, bytes: p.historyBytes, reason: `replace the copy lost with ${lost}` });
  }
  return steps;
}

/** What the product was doing at a sample, for the time tallies: each sample's interval goes to one of these. */
export type Activity = 'moving' | 'syncBudget' | 'tick' | 'cooldown' | 'blocked';

export interface SampleView {
  /** Copies in flight in the topology, plus reconfigurations the loop or a drain tracks. */
  inFlight: number;
  /** Steps the planner proposes now on this topology with the loop's live cooldowns and the transfer limits. */
  proposedNow: number;
  /** The same with the transfer limits lifted: more steps than proposedNow means some wait for the sync budget. */
  proposedUnlimited: number;
  /** The same with the transfer limits and no cooldowns at all. */
  proposedWithoutCooldowns: number;
}

/**
 * Moving: something is in flight and nothing waits for room. Sync budget: something is in flight and a step the
 * planner wants waits for a transfer slot. Tick: nothing is in flight and the planner would start a step now, so
 * the loop has yet to wake. Cooldown: nothing would start now, but would without the cooldowns. Blocked: nothing
 * would start either way (a recovery, a copy the planner leaves out, no repair).
 */
export function activityOf(s: SampleView): Activity {
  if (s.inFlight > 0) return s.proposedUnlimited > s.proposedNow ? 'syncBudget' : 'moving';
  if (s.proposedNow > 0) return 'tick';
  return s.proposedWithoutCooldowns > 0 ? 'cooldown' : 'blocked';
}

/** The benchmark's target: settled within 1.5 times the transfer bound plus one tick. */
export function targetMs(boundMs: number, tickMs: number): number {
  return 1.5 * boundMs + tickMs;
}

/** The planner's settings with both cooldowns off: what the data allows, the transfer bound's plan. */
export function withoutCooldowns(c: PlannerConfig): PlannerConfig {
  return { ...c, nodeCooldownMs: 0, partitionCooldownMs: 0 };
}

/** The planner's settings with no transfer limit in the way: what it would start if the sync budget had room. */
export function withoutLimits(c: PlannerConfig): PlannerConfig {
  return { ...c, maxTransfersPerNode: 1_000_000, maxTransfersPerCluster: 1_000_000 };
}
