import { describe, expect, it } from 'vitest';
import type { Node, Partition } from '../../cluster/contract';
import { checkFollowerMove } from '../../workflows/follower-move-rules';

const node = (id: string, over: Partial<Node> = {}): Node => ({
  id, processId: `${id}-p1`, storageInstance: `${id}-s1`, live: true, capacity: 1, zone: 'z1', publishRate: 0, deliveryRate: 0, draining: false, ...over,
});
const nodes = [node('n1'), node('n2'), node('n3'), node('n4'), node('n5', { live: false }), node('n6', { draining: true })];
const partition = (over: Partial<Partition> = {}): Partition => ({
  id: 'q-0', kind: 'queue', owner: 'n1', followers: ['n2', 'n3'], learners: [], leaving: null, epoch: 1, generation: 1,
  replicationFactor: 3, durability: { mode: 'majority_durable' }, writeRequirement: 2, history: [], pendingRecovery: null,
  admission: 'open', boundary: null, retainedCopies: [], ...over,
});

describe('checkFollowerMove', () => {
  it('accepts a follower moving to a live node without a copy', () => {
    expect(checkFollowerMove(partition(), nodes, 'n2', 'n4')).toEqual({ ok: true });
  });
  it.each([
    ['a stream', partition({ kind: 'stream' }), 'n2', 'n4', 'not_a_queue', /is a stream/],
    ['R == T', partition(), 'n2', 'n2', 'same_node', /both n2/],
    ['unknown node', partition(), 'n2', 'n9', 'unknown_node', /n9 is not in the cluster/],
    ['R is the owner', partition(), 'n1', 'n4', 'not_a_follower', /n1 owns q-0: an owner moves only by a planned handoff/],
    ['R is a learner', partition({ learners: ['n4'] }), 'n4', 'n2', 'not_a_follower', /n4 is a learner of q-0/],
    ['R not a replica', partition(), 'n4', 'n2', 'not_a_follower', /n4 is not a replica/],
    ['T holds a copy', partition(), 'n2', 'n3', 'already_a_replica', /n3 already holds a copy/],
    ['T down', partition(), 'n2', 'n5', 'node_down', /n5 is down/],
    ['T draining', partition(), 'n2', 'n6', 'node_draining', /n6 is draining/],
  ])('refuses %s', (_name, p, from, to, code, message) => {
    const result = checkFollowerMove(p, nodes, from, to);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.code).toBe(code);
      expect(result.message).toMatch(message);
    }
  });
});
