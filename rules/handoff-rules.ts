/**
 * Whether a planned owner handoff or an owner move may start, and when a handoff may commit: pure, so the CLI
 * checks a request before starting a workflow and the workflow checks it again against what the broker says.
 * Nothing is written on a "no". (The note, "Moving an owner": owners move only by a planned handoff to an
 * already admitted, caught-up replica; an owner move onto a node that is not yet a follower is a follower move
 * followed by a handoff.)
 */
import type { Node, PartitionView } from '../cluster/contract';
import { checkFollowerMove, type MoveCheck } from './follower-move-rules';

type Refused = Extract<MoveCheck, { ok: false }>;
const no = (code: string, message: string): Refused => ({ ok: false, code, message });

/** What the broker's progress says of one replica of D's kind: an admitted, caught-up, counted follower. */
function followerState(view: PartitionView, node: string): 'not_a_follower' | 'not_admitted' | 'not_caught_up' | null {
  const { partition, progress } = view;
  if (!partition.followers.includes(node)) return 'not_a_follower';
  const r = progress.replicas.find((x) => x.node === node);
  const h = partition.history.find((x) => x.node === node);
  if (!r || !h || h.suspended || !r.admitted || r.suspended) return 'not_admitted';
  if (r.phase !== 'caught_up') return 'not_caught_up';
  return null;
}

/** The followers a handoff would accept right now, for the "what would be accepted" part of a refusal. */
export function handoffCandidates(view: PartitionView, nodes: Node[]): string[] {
  const live = new Set(nodes.filter((n) => n.live).map((n) => n.id));
  return view.partition.followers.filter((f) => live.has(f) && followerState(view, f) === null);
}

function accepted(view: PartitionView, nodes: Node[]): string {
  const ok = handoffCandidates(view, nodes);
  return ok.length > 0
    ? `a handoff of ${view.partition.id} accepts ${ok.join(', ')} (admitted, caught-up followers)`
    : `no follower of ${view.partition.id} is an admitted, caught-up follower right now`;
}

/**
 * A handoff from A to D: A owns the partition, D is a live, admitted, caught-up follower. A refusal says
 * which of the three D is not, and names the followers that would be accepted.
 */
export function checkHandoff(view: PartitionView, nodes: Node[], from: string, to: string): MoveCheck {
  const p = view.partition;
  const id = p.id;
  if (p.kind !== 'queue') {
    return no('not_a_queue', `partition ${id} is a stream: only a queue's owner can be handed off (streams need their own seal path)`);
  }
  if (from === to) return no('same_node', `--from and --to are both ${from}: a handoff needs two different nodes`);
  const known = new Map(nodes.map((n) => [n.id, n]));
  for (const node of [from, to]) {
    if (!known.has(node)) return no('unknown_node', `node ${node} is not in the cluster (known: ${[...known.keys()].join(', ')})`);
  }
  if (p.owner !== from) {
    return no('not_the_owner', `${from} does not own ${id} (its owner is ${p.owner}): a handoff starts from the owner`);
  }
  switch (followerState(view, to)) {
    case 'not_a_follower': {
      const role = p.learners.includes(to) ? 'a learner' : p.leaving === to ? 'leaving' : 'not a replica';
      const hint = role === 'not a replica' ? `; to hand ${id} to ${to}, move the owner there (rebalancer move ${id} --from ${from} --to ${to})` : '';
      return no('not_a_follower', `${to} is ${role} of ${id}, not a follower: ${accepted(view, nodes)}${hint}`);
    }
    case 'not_admitted':
      return no('not_admitted', `${to} is a follower of ${id} but not admitted to its accepted history (suspended while it rejoins): ${accepted(view, nodes)}`);
    case 'not_caught_up': {
      const r = view.progress.replicas.find((x) => x.node === to)!;
      return no(
        'not_caught_up',
        `${to} is a follower of ${id} but not caught up: durable at ${r.durableOffset}, the tail is ${view.progress.tail}: ${accepted(view, nodes)}`,
      );
    }
    case null:
      break;
  }
  if (!known.get(to)!.live) return no('node_down', `${to} is down: a handoff needs a live new owner; ${accepted(view, nodes)}`);
  if (!known.get(from)!.live) return no('node_down', `the owner ${from} is down: recovery, not a handoff, replaces it`);
  return { ok: true };
}

export type OwnerMoveCheck = { ok: true; via: string; why: string } | Refused;

/**
 * An owner move from A onto T: A owns the partition, T is live, not draining and not yet a replica, and a
 * follower `via` moves its copy to T first. Without `via`, one is chosen and the reason given.
 */
export function checkOwnerMove(view: PartitionView, nodes: Node[], from: string, to: string, via?: string): OwnerMoveCheck {
  const p = view.partition;
  if (p.kind !== 'queue') {
    return no('not_a_queue', `partition ${p.id} is a stream: only a queue's owner can move (streams need their own seal path)`);
  }
  if (from === to) return no('same_node', `--from and --to are both ${from}: an owner move needs two different nodes`);
  const known = new Map(nodes.map((n) => [n.id, n]));
  for (const node of [from, to]) {
    if (!known.has(node)) return no('unknown_node', `node ${node} is not in the cluster (known: ${[...known.keys()].join(', ')})`);
  }
  if (p.owner !== from) {
    return no('not_the_owner', `${from} does not own ${p.id} (its owner is ${p.owner}): an owner move starts from the owner`);
  }
  if (p.followers.includes(to)) {
    return no('already_a_follower', `${to} is already a follower of ${p.id}: hand the owner to it instead (rebalancer handoff ${p.id} --to ${to})`);
  }
  let why: string;
  if (via === undefined) {
    const chosen = chooseVia(view, nodes, to);
    if (!chosen) return no('no_follower', `${p.id} has no follower whose copy could move to ${to}: an owner move needs one (grow the partition first)`);
    ({ via, why } = chosen);
  } else {
    why = `named in the request`;
  }
  // The follower move's own rules: T known, live, not draining, no copy yet; via a follower.
  const move = checkFollowerMove(p, nodes, via, to);
  if (!move.ok) return move;
  return { ok: true, via, why };
}

/**
 * The follower whose copy moves to T: one in T's zone keeps the copies' zone spread; among those a copy
 * that is worth least now (down or suspended) goes first; then the lowest name, so the choice is repeatable.
 */
function chooseVia(view: PartitionView, nodes: Node[], to: string): { via: string; why: string } | null {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const zone = byId.get(to)?.zone;
  const weak = (f: string): boolean => !byId.get(f)?.live || view.partition.history.some((h) => h.node === f && h.suspended);
  const followers = [...view.partition.followers].sort();
  if (followers.length === 0) return null;
  const sameZone = followers.filter((f) => byId.get(f)?.zone === zone);
  const pool = sameZone.length > 0 ? sameZone : followers;
  const weakOnes = pool.filter(weak);
  const via = (weakOnes[0] ?? pool[0])!;
  const zoneWhy = sameZone.length > 0 ? `it shares ${to}'s zone ${zone}, so the copies keep their zone spread` : `no follower shares ${to}'s zone ${zone}`;
  const pick = weakOnes.length > 0 ? `its copy is down or suspended, so it is worth least` : `first by name among ${pool.join(', ')}`;
  return { via, why: `${zoneWhy}; ${pick}` };
}
