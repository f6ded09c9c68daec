/**
 * Whether a replication-factor increase or a lost-follower replacement may start: pure, so the client checks it
 * before starting a workflow and the workflow checks it again against what the broker says at its first step.
 * Nothing is written on a "no".
 *
 * Zones: copies of a partition spread over zones as evenly as its replication factor allows, and a new copy, of an
 * increase or in place of a lost one, never spreads them less evenly (`unevenZone`; the planner's own repairs take
 * the emptiest zone, `canAdd`). The counted copies are the owner and followers, the lost one left out. So a
 * replication factor above the number of zones is possible (5 copies over 3 zones: 2, 2, 1), and an increase is
 * refused for zones only when a zone with fewer copies has a node to take it.
 *
 * Executions from before patch `zone-spread` (`spread` false) keep the rule they started under: a partition whose
 * counted copies sit in distinct zones keeps one copy per zone. Delete it with the patch.
 */
import type { Node, Partition } from '../cluster/contract';
import type { MoveCheck } from './follower-move-rules';

/** The patch under which increases and replacements spread copies over zones (see the module comment). */
export const ZONE_SPREAD = 'zone-spread';

/** The contract's largest replication factor. */
const MAX_REPLICATION_FACTOR = 16;

const no = (code: string, message: string): MoveCheck => ({ ok: false, code, message });

/** Refusals every kind shares: a stream, an unknown node. */
function checkKnown(partition: Partition, known: Map<string, Node>, named: string[]): MoveCheck | null {
  if (partition.kind !== 'queue') {
    return no('not_a_queue', `partition ${partition.id} is a stream: only queue partitions are reconfigured (streams need their own seal path)`);
  }
  for (const n of named) {
    if (!known.has(n)) return no('unknown_node', `node ${n} is not in the cluster (known: ${[...known.keys()].join(', ')})`);
  }
  return null;
}

/** A target that could not take a new copy: it holds one already, it is down or draining. */
function checkNewCopy(partition: Partition, known: Map<string, Node>, to: string): MoveCheck | null {
  const holders = [partition.owner, ...partition.followers, ...partition.learners, ...(partition.leaving ? [partition.leaving] : [])];
  if (holders.includes(to)) {
    return no('already_a_replica', `${to} already holds a copy of ${partition.id} (owner ${partition.owner}, followers ${partition.followers.join(', ') || 'none'}); choose a node without one`);
  }
  const target = known.get(to)!;
  if (!target.live) return no('node_down', `target ${to} is down: a new copy needs a live target`);
  if (target.draining) return no('node_draining', `target ${to} is draining: it takes no new copies`);
  return null;
}

/**
 * Null when a new copy of `partition` on `to` leaves its copies spread over zones no less evenly (`copies`: those
 * that stay), else why not. The spread is the most copies in a zone less the fewest in a zone with a live node that
 * could take one; a new copy may keep it, or bring it down to 1, never widen it.
 */
function unevenZone(partition: Partition, nodes: Node[], copies: string[], to: string): MoveCheck | null {
  const zoneOf = new Map(nodes.map((n) => [n.id, n.zone]));
  const counts = new Map<string, number>();
  for (const c of copies) counts.set(zoneOf.get(c) ?? '', (counts.get(zoneOf.get(c) ?? '') ?? 0) + 1);
  const held = new Set([partition.owner, ...partition.followers, ...partition.learners, ...(partition.leaving ? [partition.leaving] : [])]);
  const open = [...new Set(nodes.filter((n) => n.live && !n.draining && !held.has(n.id)).map((n) => n.zone))];
  const spread = (extra: string | null): number => {
    const at = (z: string) => (counts.get(z) ?? 0) + (z === extra ? 1 : 0);
    return Math.max(0, ...[...counts.keys(), ...open].map(at)) - Math.min(...open.map(at));
  };
  const zone = zoneOf.get(to)!;
  if (spread(zone) <= Math.max(1, spread(null))) return null;
  const fewest = Math.min(...open.map((z) => counts.get(z) ?? 0));
  const emptiest = open.filter((z) => (counts.get(z) ?? 0) === fewest).sort();
  const mine = counts.get(zone) ?? 0;
  return no(
    'same_zone',
    `${partition.id} has ${mine} ${mine === 1 ? 'copy' : 'copies'} in ${zone}, where ${to} is, and ${fewest} in ${emptiest.join(', ')}: ` +
      `a copy in ${zone} would spread its copies over zones less evenly; choose a live node in ${emptiest.join(' or ')}`,
  );
}

/** Before patch zone-spread: the zones of the given copies when they keep one copy per zone, else null. */
function spreadZones(copies: string[], known: Map<string, Node>): Set<string> | null {
  const zones = new Set(copies.map((n) => known.get(n)?.zone ?? ''));
  return copies.length >= 2 && zones.size === copies.length ? zones : null;
}

/** A replication-factor increase of `partition` by one copy on `to`; `spread`: the zone rule of patch zone-spread. */
export function checkGrow(partition: Partition, nodes: Node[], to: string, spread = true): MoveCheck {
  const known = new Map(nodes.map((n) => [n.id, n]));
  const refused = checkKnown(partition, known, [to]) ?? checkNewCopy(partition, known, to);
  if (refused) return refused;
  const id = partition.id;
  const rf = partition.replicationFactor + 1;
  if (rf > MAX_REPLICATION_FACTOR) {
    return no('above_maximum', `${id} is at replication factor ${partition.replicationFactor}; the broker allows at most ${MAX_REPLICATION_FACTOR}`);
  }
  const live = nodes.filter((n) => n.live);
  if (rf > live.length) {
    return no(
      'too_few_nodes',
      `replication factor ${rf} for ${id} needs ${rf} live nodes, one per copy; the cluster has ${live.length} (${live.map((n) => n.id).join(', ')})`,
    );
  }
  const copies = [partition.owner, ...partition.followers];
  if (spread) return unevenZone(partition, nodes, copies, to) ?? { ok: true };
  const zones = spreadZones(copies, known);
  if (zones) {
    const liveZones = new Set(live.map((n) => n.zone));
    if (rf > liveZones.size) {
      return no(
        'too_few_zones',
        `${id} keeps one copy per zone (${[...zones].join(', ')}); replication factor ${rf} needs ${rf} zones with a live node, the cluster has ${liveZones.size} (${[...liveZones].join(', ')})`,
      );
    }
    const zone = known.get(to)!.zone;
    if (zones.has(zone)) {
      return no('same_zone', `${id} keeps one copy per zone and already has one in ${zone}, where ${to} is; choose a live node in a zone it has no copy in`);
    }
  }
  return { ok: true };
}

/** Why `lost` is not a lost copy of the partition, in words, or null when it is one. */
function notLost(partition: Partition, known: Map<string, Node>, lost: string): string | null {
  const id = partition.id;
  if (partition.owner === lost) {
    return `${lost} owns ${id}: a lost owner is the broker's recovery (a pending recovery activates another owner), never a replacement`;
  }
  if (!partition.followers.includes(lost)) {
    const role = partition.learners.includes(lost) ? 'a learner (cancel its move instead)' : partition.leaving === lost ? 'leaving (its move removes it)' : 'not a replica';
    return `${lost} is ${role} of ${id}: --lost must be one of its followers (${partition.followers.join(', ') || 'none'}) whose node is down`;
  }
  if (known.get(lost)!.live) {
    const suspended = partition.history.some((h) => h.node === lost && h.suspended);
    return suspended
      ? `${lost} is a suspended follower of ${id} on a live node: it rejoins by itself (the broker's own path); a lost copy is a follower whose node is down`
      : `${lost} is a follower of ${id} on a live node: its copy is not lost (move it with \`rebalancer move\`); a lost copy is a follower whose node is down`;
  }
  return null;
}

/** A replacement of the lost follower `lost` by `withNode`; `spread`: the zone rule of patch zone-spread. */
export function checkReplace(partition: Partition, nodes: Node[], lost: string, withNode: string, spread = true): MoveCheck {
  const known = new Map(nodes.map((n) => [n.id, n]));
  const unknown = checkKnown(partition, known, [lost, withNode]);
  if (unknown) return unknown;
  if (lost === withNode) return no('same_node', `--lost and --with are both ${lost}: a replacement needs another node`);
  const why = notLost(partition, known, lost);
  if (why) return no('not_lost', why);
  const refused = checkNewCopy(partition, known, withNode);
  if (refused) return refused;
  const copies = [partition.owner, ...partition.followers];
  if (spread) return unevenZone(partition, nodes, copies.filter((n) => n !== lost), withNode) ?? { ok: true };
  const zone = known.get(withNode)!.zone;
  if (spreadZones(copies, known) && copies.some((n) => n !== lost && known.get(n)!.zone === zone)) {
    return no('same_zone', `${partition.id} keeps one copy per zone and already has one in ${zone}, where ${withNode} is; choose a live node in ${known.get(lost)!.zone} or a zone it has no copy in`);
  }
  return { ok: true };
}
