import { describe, expect, it } from 'vitest';
import type { Node, Partition, PartitionView, ReplicaProgress } from '../../cluster/contract';
import { countedBelow } from '../../activities';
import { checkHandoff, checkOwnerMove, handoffCandidates } from '../../rules/handoff-rules';

const node = (id: string, over: Partial<Node> = {}): Node => ({
  id, processId: `${id}-p1`, storageInstance: `${id}-s1`, live: true, downSince: null, capacity: 1, zone: 'z1', publishRate: 0, deliveryRate: 0, draining: false, ...over,
});
const nodes = [node('n1'), node('n2'), node('n3'), node('n4', { zone: 'z2' }), node('n5', { live: false }), node('n6', { draining: true }), node('n7', { zone: 'z2' })];
const entry = (n: string, suspended = false) => ({ node: n, processId: `${n}-p1`, storageInstance: `${n}-s1`, suspended });
const replica = (n: string, over: Partial<ReplicaProgress> = {}): ReplicaProgress => ({
  node: n, role: 'follower', durableOffset: 1000, live: true, admitted: true, suspended: false, bytesRemaining: 0, phase: 'caught_up', stalledSince: null, pausedForRecovery: false, ...over,
});

/** q-0: owner n1, followers n2 and n3, all admitted and caught up at 1000 unless overridden. */
function view(over: Partial<Partition> = {}, replicas: Record<string, Partial<ReplicaProgress>> = {}): PartitionView {
  const partition: Partition = {
    id: 'q-0', kind: 'queue', owner: 'n1', followers: ['n2', 'n3'], learners: [], leaving: null, epoch: 1, generation: 1,
    replicationFactor: 3, durability: { mode: 'majority_durable' }, writeRequirement: 2,
    history: [entry('n1'), entry('n2'), entry('n3')], pendingRecovery: null, admission: 'open', boundary: null, retainedCopies: [], historyBytes: 0, publishRate: 0, deliveryRate: 0, ...over,
  };
  const holders = [partition.owner, ...partition.followers, ...partition.learners, ...(partition.leaving ? [partition.leaving] : [])];
  return {
    partition,
    progress: {
      partition: 'q-0', generation: 1, epoch: 1, now: 0, tail: 1000, confirmedTail: 990, logStart: 0, messageBytes: 1024, boundary: null,
      replicas: holders.map((n) => replica(n, { role: n === partition.owner ? 'owner' : 'follower', ...replicas[n] })),
    },
  };
}

function refused(result: { ok: boolean; code?: string; message?: string }): { code: string; message: string } {
  expect(result.ok).toBe(false);
  return result as { code: string; message: string };
}

describe('checkHandoff: A to D, D an admitted, caught-up follower', () => {
  it('accepts the owner handing off to an admitted, caught-up follower', () => {
    expect(checkHandoff(view(), nodes, 'n1', 'n2')).toEqual({ ok: true });
  });

  it.each([
    ['a stream', view({ kind: 'stream' }), 'n1', 'n2', 'not_a_queue', /q-0 is a stream/],
    ['A == D', view(), 'n1', 'n1', 'same_node', /both n1/],
    ['an unknown node', view(), 'n1', 'n9', 'unknown_node', /n9 is not in the cluster/],
    ['A not the owner', view(), 'n2', 'n3', 'not_the_owner', /n2 does not own q-0 \(its owner is n1\)/],
    ['D not a replica', view(), 'n1', 'n4', 'not_a_follower', /n4 is not a replica of q-0, not a follower: a handoff of q-0 accepts n2, n3.*rebalancer move q-0 --from n1 --to n4/],
    ['D a learner', view({ learners: ['n4'] }, { n4: { role: 'learner', phase: 'tail', admitted: false } }), 'n1', 'n4', 'not_a_follower', /n4 is a learner of q-0, not a follower: a handoff of q-0 accepts n2, n3 \(admitted/],
    ['D leaving', view({ followers: ['n2'], leaving: 'n3' }), 'n1', 'n3', 'not_a_follower', /n3 is leaving of q-0, not a follower: a handoff of q-0 accepts n2 \(admitted/],
    [
      'D suspended (not admitted)',
      view({ history: [entry('n1'), entry('n2'), entry('n3', true)] }, { n3: { suspended: true } }),
      'n1', 'n3', 'not_admitted', /n3 is a follower of q-0 but not admitted.*accepts n2 \(admitted/,
    ],
    ['D lagging (not caught up)', view({}, { n3: { durableOffset: 700, phase: 'tail' } }), 'n1', 'n3', 'not_caught_up', /n3 is a follower of q-0 but not caught up: durable at 700, the tail is 1000: a handoff of q-0 accepts n2 \(admitted/],
    [
      'D down',
      view({ followers: ['n2', 'n5'], history: [entry('n1'), entry('n2'), entry('n5')] }, { n5: { live: false } }),
      'n1', 'n5', 'node_down', /n5 is down: a handoff needs a live new owner; a handoff of q-0 accepts n2 \(admitted/,
    ],
    ['no candidate at all', view({}, { n2: { phase: 'tail' }, n3: { phase: 'checkpoint' } }), 'n1', 'n3', 'not_caught_up', /no follower of q-0 is an admitted, caught-up follower right now/],
  ])('refuses %s, saying why and what would be accepted', (_name, v, from, to, code, message) => {
    const r = refused(checkHandoff(v, nodes, from, to));
    expect(r.code).toBe(code);
    expect(r.message).toMatch(message);
  });

  it('refuses a handoff from an owner that is down: recovery replaces it', () => {
    const v = view({ owner: 'n5', followers: ['n2', 'n3'], history: [entry('n5'), entry('n2'), entry('n3')] });
    expect(refused(checkHandoff(v, nodes, 'n5', 'n2'))).toMatchObject({ code: 'node_down', message: expect.stringMatching(/owner n5 is down/) });
  });

  it('names only live, admitted, caught-up followers as candidates', () => {
    expect(handoffCandidates(view({}, { n3: { phase: 'tail' } }), nodes)).toEqual(['n2']);
  });
});

describe('checkOwnerMove: A onto T through a follower move of `via`', () => {
  it('accepts a named via', () => {
    expect(checkOwnerMove(view(), nodes, 'n1', 'n4', 'n3')).toEqual({ ok: true, via: 'n3', why: 'named in the request' });
  });

  it('picks a follower in T\'s zone when there is one, and says so', () => {
    const v = view({ followers: ['n2', 'n7'], history: [entry('n1'), entry('n2'), entry('n7')] });
    const r = checkOwnerMove(v, nodes, 'n1', 'n4');
    expect(r).toMatchObject({ ok: true, via: 'n7', why: expect.stringMatching(/shares n4's zone z2/) });
  });

  it('prefers a follower whose copy is worth least (suspended) within the pool, else the first by name', () => {
    expect(checkOwnerMove(view(), nodes, 'n1', 'n4')).toMatchObject({ ok: true, via: 'n2', why: expect.stringMatching(/no follower shares n4's zone z2; first by name among n2, n3/) });
    const v = view({ history: [entry('n1'), entry('n2'), entry('n3', true)] });
    expect(checkOwnerMove(v, nodes, 'n1', 'n4')).toMatchObject({ ok: true, via: 'n3', why: expect.stringMatching(/down or suspended/) });
  });

  it.each([
    ['a stream', view({ kind: 'stream' }), 'n1', 'n4', undefined, 'not_a_queue', /q-0 is a stream/],
    ['A == T', view(), 'n1', 'n1', undefined, 'same_node', /both n1/],
    ['unknown T', view(), 'n1', 'n9', undefined, 'unknown_node', /n9 is not in the cluster/],
    ['A not the owner', view(), 'n2', 'n4', undefined, 'not_the_owner', /n2 does not own q-0/],
    ['T already a follower', view(), 'n1', 'n3', undefined, 'already_a_follower', /rebalancer handoff q-0 --to n3/],
    ['T a learner', view({ learners: ['n4'] }), 'n1', 'n4', undefined, 'already_a_replica', /n4 already holds a copy/],
    ['T down', view(), 'n1', 'n5', undefined, 'node_down', /n5 is down/],
    ['T draining', view(), 'n1', 'n6', undefined, 'node_draining', /n6 is draining/],
    ['via not a follower', view(), 'n1', 'n4', 'n7', 'not_a_follower', /n7 is not a replica/],
    ['no follower to move', view({ followers: [], replicationFactor: 1, writeRequirement: 1 }), 'n1', 'n4', undefined, 'no_follower', /grow the partition first/],
  ])('refuses %s', (_name, v, from, to, via, code, message) => {
    const r = refused(checkOwnerMove(v, nodes, from, to, via));
    expect(r.code).toBe(code);
    expect(r.message).toMatch(message);
  });
});

describe('the final boundary: which counted copies are below it', () => {
  it('names the counted copies below the final boundary, never a learner, a leaving, a down or a suspended follower', () => {
    const v = view(
      { learners: ['n4'], leaving: 'n7', followers: ['n2', 'n3', 'n5'], history: [entry('n1'), entry('n2'), entry('n3', true), entry('n5')] },
      { n1: { durableOffset: 1000 }, n2: { durableOffset: 980 }, n3: { durableOffset: 10, suspended: true }, n4: { durableOffset: 0 }, n7: { durableOffset: 0 }, n5: { durableOffset: 5 } },
    );
    expect(countedBelow({ view: v, nodes }, 1000)).toEqual(['n2']);
    expect(countedBelow({ view: v, nodes }, 980)).toEqual([]);
    expect(countedBelow({ view: v, nodes }, 1001)).toEqual(['n1', 'n2']);
  });
});
