/**
 * Whether a follower move may start: pure, so the CLI checks it before starting a workflow and the
 * workflow checks it again against what the broker says at its first step. Nothing is written on a "no".
 */
import type { Node, Partition } from '../cluster/contract';

export type MoveCheck = { ok: true } | { ok: false; code: string; message: string };

export function checkFollowerMove(partition: Partition, nodes: Node[], from: string, to: string): MoveCheck {
  const no = (code: string, message: string): MoveCheck => ({ ok: false, code, message });
  const id = partition.id;
  if (partition.kind !== 'queue') {
    return no('not_a_queue', `partition ${id} is a stream: only queue partitions can move (streams need their own seal path)`);
  }
  if (from === to) return no('same_node', `--from and --to are both ${from}: a move needs two different nodes`);
  const known = new Map(nodes.map((n) => [n.id, n]));
  for (const node of [from, to]) {
    if (!known.has(node)) {
      return no('unknown_node', `node ${node} is not in the cluster (known: ${[...known.keys()].join(', ')})`);
    }
  }
  if (partition.owner === from) {
    return no(
      'not_a_follower',
      `${from} owns ${id}: an owner moves only by a planned handoff; choose one of its followers (${partition.followers.join(', ') || 'none'})`,
    );
  }
  if (!partition.followers.includes(from)) {
    const role = partition.learners.includes(from) ? 'a learner' : partition.leaving === from ? 'leaving' : 'not a replica';
    return no(
      'not_a_follower',
      `${from} is ${role} of ${id}: --from must be one of its followers (${partition.followers.join(', ') || 'none'})`,
    );
  }
  const holders = [partition.owner, ...partition.followers, ...partition.learners, ...(partition.leaving ? [partition.leaving] : [])];
  if (holders.includes(to)) {
    return no('already_a_replica', `${to} already holds a copy of ${id} (owner ${partition.owner}, followers ${partition.followers.join(', ')}${partition.learners.length ? `, learners ${partition.learners.join(', ')}` : ''})`);
  }
  const target = known.get(to)!;
  if (!target.live) return no('node_down', `target ${to} is down: a move needs a live target`);
  if (target.draining) return no('node_draining', `target ${to} is draining: it takes no new copies`);
  return { ok: true };
}
