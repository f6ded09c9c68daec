/**
 * A drain's rules as pure functions: whether a node can be drained at all (it exists, every copy it holds can
 * move and has somewhere to go, every partition it owns has a follower to hand off to), how much is left, and
 * what keeps the copies left from moving now.
 */
import type { Partition, Topology } from '../cluster/contract';
import type { InFlightMove, PlanInput, PlannerConfig, Proposal } from '../planner/types';
import { holders, selectStarts, type Selection } from './rebalancer-rules';

export type DrainRefusal = 'unknown_node' | 'unmovable_copies' | 'not_enough_room' | 'no_follower';
export type DrainCheck = { ok: true } | { ok: false; code: DrainRefusal; message: string };

const list = (ids: string[]) => ids.slice(0, 5).join(', ') + (ids.length > 5 ? ` and ${ids.length - 5} more` : '');

/** A copy nothing may move yet: "Queues come first. Streams need their own seal and selection path." */
const unmovable = (p: Partition) => p.kind === 'stream';

/** The stream partitions the node holds a copy of: a drain leaves them where they are. */
export function streamsOn(topology: Topology, node: string): string[] {
  return topology.partitions.filter((p) => unmovable(p) && holders(p).includes(node)).map((p) => p.id);
}

/**
 * The nodes a copy of `p` on `node` may go to: live, not draining, holding no copy of p, in a zone holding the
 * fewest of p's other counted copies (owner and followers) among the zones with such a node, as the planner's drain
 * chooses (`canAdd`). Zones narrow where a copy goes, never whether: a zone's only node drains into the emptiest
 * zones left, so copies spread as evenly as the nodes left allow (the rule of an increase). A change in flight (a
 * learner, a leaving copy) is left out: it ends with the partition at its replication factor again, and the drain
 * waits for it.
 */
function roomFor(topology: Topology, p: Partition, node: string): Topology['nodes'] {
  const others = holders(p);
  const open = topology.nodes.filter((n) => n.id !== node && n.live && !n.draining && !others.includes(n.id));
  const zoneOf = new Map(topology.nodes.map((n) => [n.id, n.zone]));
  const counted = [p.owner, ...p.followers].filter((n) => n !== node).map((n) => zoneOf.get(n));
  const inZone = (z: string) => counted.filter((c) => c === z).length;
  const fewest = Math.min(...open.map((n) => inZone(n.zone)));
  return open.filter((n) => inZone(n.zone) === fewest);
}

/**
 * Refuse a drain up front: an unknown node; a copy that cannot move (a stream), unless the drain empties the
 * queues only; an owned partition without a follower to take the owner role; or copies with nowhere to go (`roomFor`).
 */
export function checkDrain(topology: Topology, node: string, queuesOnly = false): DrainCheck {
  const known = topology.nodes.map((n) => n.id);
  if (!known.includes(node)) {
    return { ok: false, code: 'unknown_node', message: `node ${node} is not in the cluster; its nodes are ${list(known)}` };
  }
  const streams = streamsOn(topology, node);
  if (streams.length > 0 && !queuesOnly) {
    return {
      ok: false,
      code: 'unmovable_copies',
      message:
        `${node} holds a copy of the stream${streams.length > 1 ? 's' : ''} ${list(streams)}, which cannot move (streams need their own seal and selection path), ` +
        `so the drain could never end; drain with --queues-only (queuesOnly: true) to move every queue copy off ${node} and leave the streams there`,
    };
  }
  const held = topology.partitions.filter((p) => !unmovable(p) && holders(p).includes(node));

  const ownerless = held.filter((p) => p.owner === node && p.followers.length === 0).map((p) => p.id);
  if (ownerless.length > 0) {
    return {
      ok: false,
      code: 'no_follower',
      message: `${node} owns ${list(ownerless)} with no follower to hand the owner role to (replication factor 1); raise the replication factor first`,
    };
  }

  const short = held.filter((p) => roomFor(topology, p, node).length === 0).length;
  if (short === 0) return { ok: true };
  return {
    ok: false,
    code: 'not_enough_room',
    message:
      `the other nodes cannot hold every copy on ${node}: ${short} of its ${held.length} copies have nowhere to go ` +
      `(no live node that is not draining and holds no copy of the partition); add nodes first`,
  };
}

export interface DrainLeft {
  /** Partitions the drain still moves a copy of off the node (streams left out), and of those the ones it owns. */
  partitionsLeft: number;
  ownedLeft: number;
  /** Retained history of those partitions: what still has to be copied off the node. */
  bytesLeft: number;
  /** Streams the node holds a copy of, which no drain moves. Absent in a snapshot an older worker recorded. */
  streams?: string[];
}

export function drainLeft(topology: Topology, node: string): DrainLeft {
  const held = topology.partitions.filter((p) => !unmovable(p) && holders(p).includes(node));
  return {
    partitionsLeft: held.length,
    ownedLeft: held.filter((p) => p.owner === node).length,
    bytesLeft: held.reduce((sum, p) => sum + p.historyBytes, 0),
    streams: streamsOn(topology, node),
  };
}

/** What keeps some copies on a drained node from moving now; `passes`: the wait ends without anyone acting. */
export interface DrainBlocker {
  partitions: string[];
  why: string;
  passes: boolean;
}

const nameNodes = (ids: string[]) => (ids.length === 1 ? ids[0]! : `${ids.slice(0, -1).join(', ')} and ${ids.at(-1)!}`);

/**
 * Why each copy left on `node` that the plan moves nowhere this tick stays, in the note's words: a stream, a
 * pending recovery, a change in flight on its partition, a suspended copy rejoining, no admitted follower to hand
 * the owner role to, no node with room (copies already there, zones), the transfer budget. Where the wait cannot
 * end by itself (a stream, the only other copies on nodes that are down, no node in a free zone) it says so and
 * what would end it. Grouped by cause, so a hundred copies waiting on one budget read as one line.
 */
export function drainBlockers(
  topology: Topology,
  node: string,
  planned: Proposal[],
  inFlight: InFlightMove[],
  config: Pick<PlannerConfig, 'maxTransfersPerNode' | 'maxTransfersPerCluster'>,
  queuesOnly: boolean,
): DrainBlocker[] {
  const nodes = new Map(topology.nodes.map((n) => [n.id, n]));
  const moving = new Set([...planned, ...inFlight].filter((m) => m.from === node).map((m) => m.partition));
  const inbound = new Map<string, number>();
  for (const m of inFlight) if (m.op !== 'owner_handoff') inbound.set(m.to, (inbound.get(m.to) ?? 0) + 1);
  const down = (ids: string[]) => ids.filter((id) => nodes.get(id)?.live !== true);
  // While the node owns a partition only handoffs start, so its follower copies wait for them, not for a budget.
  const handingOff = topology.partitions.some((p) => !unmovable(p) && p.owner === node);
  const out = new Map<string, DrainBlocker>();
  const add = (partition: string, why: string, passes: boolean) => {
    const b = out.get(why) ?? { partitions: [], why, passes };
    b.partitions.push(partition);
    out.set(why, b);
  };
  const never = (what: string) => `; this does not pass by itself: ${what}`;

  for (const p of topology.partitions) {
    const copies = holders(p);
    if (!copies.includes(node) || moving.has(p.id)) continue;
    if (unmovable(p)) {
      if (!queuesOnly) add(p.id, `a stream: streams do not move yet${never(`undrain ${node}, then drain it with --queues-only`)}`, false);
      continue;
    }
    if (p.pendingRecovery) {
      add(p.id, `a pending recovery (${p.pendingRecovery.failedOwner} failed in epoch ${p.pendingRecovery.epoch}): rebalancing and drains wait until it activates`, true);
      continue;
    }
    const change = inFlight.find((m) => m.partition === p.id);
    if (change || p.learners.length > 0 || p.leaving !== null || p.admission === 'closed') {
      const what =
        p.learners.length > 0 ? `learner ${p.learners.join(', ')} catching up`
        : p.leaving !== null ? `leaving replica ${p.leaving} not yet removed`
        : p.admission === 'closed' ? 'admission closed for a handoff'
        : `a ${change!.op.replace('_', ' ')} to ${change!.to}`;
      add(p.id, `a change in flight on the partition (${what}): the copy moves once it ends`, true);
      continue;
    }
    // A suspended copy on a down node holds nothing up (the planner moves around it and the loop repairs it).
    const suspended = p.history.filter((h) => h.suspended).map((h) => h.node);
    const gone = down(suspended);
    const rejoining = suspended.filter((n) => !gone.includes(n));
    if (rejoining.length > 0) {
      add(p.id, `a suspended copy on ${nameNodes(rejoining)} rejoining: the copy moves once it is admitted again`, true);
      continue;
    }
    if (p.owner === node) {
      if (nodes.get(node)?.live !== true) {
        add(p.id, `${node} is down and owns the partition: ordinary recovery moves its ownership first`, true);
        continue;
      }
      const admitted = p.followers.filter((f) => nodes.get(f)?.live === true && !nodes.get(f)!.draining);
      if (admitted.length > 0) continue;
      const gone = down(p.followers);
      const draining = p.followers.filter((f) => !gone.includes(f));
      const where = [...(gone.length > 0 ? [`on ${nameNodes(gone)}, down`] : []), ...(draining.length > 0 ? [`on ${nameNodes(draining)}, draining`] : [])].join(' and ');
      const what = p.followers.length === 0 ? 'it has no follower: raise its replication factor' : `its followers are ${where}: ${[...(gone.length > 0 ? [`bring ${nameNodes(gone)} back`] : []), ...(draining.length > 0 ? [`undrain ${nameNodes(draining)}`] : [])].join(' or ')}`;
      add(p.id, `no admitted follower to hand the owner role to${never(what)}`, false);
      continue;
    }
    const room = roomFor(topology, p, node);
    if (room.length === 0) {
      const gone = topology.nodes.filter((n) => !n.live && !copies.includes(n.id)).map((n) => n.id);
      const what = `add a node${gone.length > 0 ? `, or bring ${nameNodes(gone)} back` : ''}`;
      add(p.id, `no node can take the copy: every live node that is not draining holds a copy of the partition${never(what)}`, false);
      continue;
    }
    if (handingOff) continue;
    if (inFlight.length >= config.maxTransfersPerCluster) {
      add(p.id, `the cluster transfer limit: ${inFlight.length} of ${config.maxTransfersPerCluster} moves in flight`, true);
      continue;
    }
    const full = room.filter((n) => (inbound.get(n.id) ?? 0) >= config.maxTransfersPerNode).map((n) => n.id);
    if (full.length === room.length) add(p.id, `the transfer budget on ${nameNodes(full)}, the node${full.length > 1 ? 's' : ''} that could take the copy, is in use (${config.maxTransfersPerNode} transfers each)`, true);
  }
  return [...out.values()];
}

/** A blocker as the drain's status shows it: the partitions, then why. */
export function blockerLine(b: DrainBlocker): string {
  return `${list(b.partitions)}: ${b.why}`;
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
export function heldByDrains(topology: Topology, draining: readonly string[], elsewhere = drainedElsewhere(topology, draining)): string[] {
  const marked = new Set(elsewhere);
  if (marked.size === 0) return [];
  return topology.partitions
    .filter((p) => {
      const on = holders(p);
      return on.some((n) => marked.has(n)) && !on.some((n) => draining.includes(n));
    })
    .map((p) => p.id);
}

/** Nodes marked draining that the caller does not drain itself: another drain empties them. */
function drainedElsewhere(topology: Topology, draining: readonly string[]): string[] {
  return topology.nodes.filter((n) => n.draining && !draining.includes(n.id)).map((n) => n.id);
}

/**
 * The planner's input for a caller that drains `input.draining` (none, for the loop): the partitions another drain
 * holds are not movable, as a partition cooling down is not, so the planner neither proposes them nor spends a
 * transfer slot on them, and plans the rest of the cluster; nor does its drain step wait on that drain's nodes
 * (`drainedElsewhere`), whose waits would hide the plan's own reason. A node marked draining is already neither a
 * source nor a target of the planner's balancing moves.
 */
export function planInputFor(topology: Topology, input: Omit<PlanInput, 'topology'>): PlanInput {
  const draining = input.draining ?? [];
  const elsewhere = drainedElsewhere(topology, draining);
  const held = heldByDrains(topology, draining, elsewhere);
  // A drain leaves repairs to the loop (PlanInput.repair).
  if (draining.length > 0) input = { ...input, repair: false };
  if (elsewhere.length > 0) input = { ...input, drainedElsewhere: elsewhere };
  if (held.length === 0) return { ...input, topology };
  const partitions = { ...input.cooldowns.partitions };
  for (const id of held) partitions[id] = Number.POSITIVE_INFINITY;
  return { ...input, topology, cooldowns: { ...input.cooldowns, partitions } };
}
