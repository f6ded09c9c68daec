/**
 * A drain's rules as pure functions: whether a node can be drained at all (it exists, every copy it holds has
 * somewhere to go, every partition it owns has a follower to hand off to) and how much is left.
 */
import type { Topology } from '../cluster/contract';
import type { InFlightMove, PlanInput, PlannerConfig, Proposal } from '../planner/types';
import { holders, selectStarts, type Selection } from './rebalancer-rules';

export type DrainCheck = { ok: true } | { ok: false; code: 'unknown_node' | 'not_enough_room' | 'no_follower'; message: string };

const list = (ids: string[]) => ids.slice(0, 5).join(', ') + (ids.length > 5 ? ` and ${ids.length - 5} more` : '');

/**
 * Refuse a drain up front: an unknown node; an owned partition without a follower to take the owner role; or
 * copies with nowhere to go. A copy can go to a live node that is not draining and holds no copy of its
 * partition; when nodes carry zones (more than one zone in the cluster), only to a zone no other copy of the
 * partition is in, so shortfalls are counted per zone.
 */
export function checkDrain(topology: Topology, node: string): DrainCheck {
  const known = topology.nodes.map((n) => n.id);
  if (!known.includes(node)) {
    return { ok: false, code: 'unknown_node', message: `node ${node} is not in the cluster; its nodes are ${list(known)}` };
  }
  const zoneOf = new Map(topology.nodes.map((n) => [n.id, n.zone]));
  const zoned = new Set(zoneOf.values()).size > 1;
  const open = topology.nodes.filter((n) => n.id !== node && n.live && !n.draining);
  const held = topology.partitions.filter((p) => holders(p).includes(node));

  const ownerless = held.filter((p) => p.owner === node && p.followers.length === 0).map((p) => p.id);
  if (ownerless.length > 0) {
    return {
      ok: false,
      code: 'no_follower',
      message: `${node} owns ${list(ownerless)} with no follower to hand the owner role to (replication factor 1); raise the replication factor first`,
    };
  }

  const shortBy = new Map<string, number>();
  let short = 0;
  for (const p of held) {
    const others = holders(p).filter((n) => n !== node);
    const usedZones = new Set(others.map((n) => zoneOf.get(n)));
    const fits = open.some((n) => !others.includes(n.id) && (!zoned || !usedZones.has(n.zone)));
    if (fits) continue;
    short++;
    // The zones the copy may go to: those its partition's other copies leave free.
    const free = [...new Set(zoneOf.values())].filter((z) => !usedZones.has(z)).sort();
    const zone = zoned ? free.join('/') || 'no free zone' : '';
    shortBy.set(zone, (shortBy.get(zone) ?? 0) + 1);
  }
  if (short === 0) return { ok: true };
  const perZone = zoned ? `; short per zone: ${[...shortBy].map(([z, n]) => `${z} ${n}`).join(', ')} (copies of one partition stay in distinct zones)` : '';
  return {
    ok: false,
    code: 'not_enough_room',
    message:
      `the other nodes cannot hold every copy on ${node}: ${short} of its ${held.length} copies have nowhere to go ` +
      `(no live node that is not draining and holds no copy of the partition${zoned ? ' in a free zone' : ''})${perZone}; add nodes first`,
  };
}

export interface DrainLeft {
  /** Partitions the node holds any copy of, and of those the ones it owns. */
  partitionsLeft: number;
  ownedLeft: number;
  /** Retained history of those partitions: what still has to be copied off the node. */
  bytesLeft: number;
}

export function drainLeft(topology: Topology, node: string): DrainLeft {
  const held = topology.partitions.filter((p) => holders(p).includes(node));
  return {
    partitionsLeft: held.length,
    ownedLeft: held.filter((p) => p.owner === node).length,
    bytesLeft: held.reduce((sum, p) => sum + p.historyBytes, 0),
  };
}

/**
 * The drain's steps to start now: only steps off its node, owners first (while the node owns a partition only
 * handoffs start, then only follower moves), under the same limits as the loop.
 */
export function drainStarts(
  steps: Proposal[],
  inFlight: InFlightMove[],
  config: Pick<PlannerConfig, 'maxTransfersPerNode' | 'maxTransfersPerCluster'>,
  node: string,
  ownsSome: boolean,
): Selection {
  const wanted: Proposal['op'] = ownsSome ? 'owner_handoff' : 'follower_move';
  return selectStarts(steps, inFlight, config, new Set(), (s) => s.from === node && s.op === wanted);
}

/**
 * The partitions a drain other than the caller's holds: those with a copy on a node marked draining that the
 * caller does not drain itself (`draining`: the nodes the caller drains, none for the loop), and none on a node
 * it drains. That drain moves them; a planner that proposed them too would spend its transfer slots on steps its
 * caller leaves to the drain and plan nothing else.
 */
export function heldByDrains(topology: Topology, draining: readonly string[]): string[] {
  const marked = new Set(topology.nodes.filter((n) => n.draining && !draining.includes(n.id)).map((n) => n.id));
  if (marked.size === 0) return [];
  return topology.partitions
    .filter((p) => {
      const on = holders(p);
      return on.some((n) => marked.has(n)) && !on.some((n) => draining.includes(n));
    })
    .map((p) => p.id);
}

/**
 * The planner's input for a caller that drains `input.draining` (none, for the loop): the partitions another drain
 * holds are not movable, as a partition cooling down is not, so the planner neither proposes them nor spends a
 * transfer slot on them, and plans the rest of the cluster. A node marked draining is already neither a source
 * nor a target of the planner's balancing moves.
 */
export function planInputFor(topology: Topology, input: Omit<PlanInput, 'topology'>): PlanInput {
  const held = heldByDrains(topology, input.draining ?? []);
  if (held.length === 0) return { ...input, topology };
  const partitions = { ...input.cooldowns.partitions };
  for (const id of held) partitions[id] = Number.POSITIVE_INFINITY;
  return { ...input, topology, cooldowns: { ...input.cooldowns, partitions } };
}
