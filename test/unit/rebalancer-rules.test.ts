import { describe, expect, it } from 'vitest';
import type { Node, Partition, Topology } from '../../cluster/contract';
import type { InFlightMove, Proposal } from '../../planner/types';
import type { TrackedMove } from '../../workflows/definitions';
import { DEFAULT_PLANNER_CONFIG, planNow } from '../../planner';
import { checkDrain, drainLeft, drainStarts, heldByDrains, planInputFor } from '../../workflows/rebalancer-drain-rules';
import { checkOperatorNote, closedListFrom, inFlightMoves, pruneCooldowns, recordClosed, recordEnded, recoveryPending, selectStarts } from '../../workflows/rebalancer-rules';

const node = (id: string, over: Partial<Node> = {}): Node => ({
  id, processId: `${id}-p1`, storageInstance: `${id}-s1`, live: true, capacity: 1, zone: 'z1', publishRate: 0, deliveryRate: 0, draining: false, ...over,
});
const partition = (id: string, owner: string, followers: string[], over: Partial<Partition> = {}): Partition => ({
  id, kind: 'queue', owner, followers, learners: [], leaving: null, epoch: 1, generation: 1,
  replicationFactor: followers.length + 1, durability: { mode: 'majority_durable' }, writeRequirement: 2, history: [], pendingRecovery: null,
  admission: 'open', boundary: null, retainedCopies: [], historyBytes: 1000, publishRate: 0, deliveryRate: 0, ...over,
});
const topology = (nodes: Node[], partitions: Partition[]): Topology => ({ contractVersion: '1', generation: 1, now: 0, nodes, partitions });
const step = (partition: string, from: string, to: string, op: Proposal['op'] = 'follower_move'): Proposal => ({ op, partition, from, to, bytes: 100, reason: 'test' });
const tracked = (partition: string, from: string, to: string, runId = `run-${partition}`): TrackedMove => ({
  partition, op: 'follower_move', from, to, workflowId: `reconfigure-${partition}`, runId, startedAt: 0, bytes: 500, reason: 'test',
});
const limits = { maxTransfersPerNode: 2, maxTransfersPerCluster: 3 };

describe('checkOperatorNote: pause and resume record who and why', () => {
  it('accepts a pause with who and why while running, and a resume while paused', () => {
    expect(checkOperatorNote('pause', { by: 'alice', reason: 'disk upgrade' }, null)).toBeNull();
    expect(checkOperatorNote('resume', { by: 'bob', reason: 'done' }, { by: 'alice', reason: 'disk upgrade', at: 1 })).toBeNull();
  });
  it.each([
    ['pause without a reason', 'pause', { by: 'alice', reason: '  ' }, null, /pause needs a reason: "reason" is empty/],
    ['pause without who', 'pause', { by: '', reason: 'x' }, null, /pause needs who asks/],
    ['pause when paused', 'pause', { by: 'bob', reason: 'x' }, { by: 'alice', reason: 'disk upgrade', at: 1 }, /already paused by alice \(disk upgrade\)/],
    ['resume when running', 'resume', { by: 'bob', reason: 'x' }, null, /not paused/],
    ['resume without a reason', 'resume', { by: 'bob', reason: '' }, { by: 'alice', reason: 'y', at: 1 }, /resume needs a reason/],
  ] as const)('refuses %s', (_name, action, request, paused, message) => {
    expect(checkOperatorNote(action, request, paused)).toMatch(message);
  });
});

describe('recordEnded and cooldowns', () => {
  const config = { nodeCooldownMs: 1000, partitionCooldownMs: 5000 };
  const counts = { started: 2, completed: 0, cancelled: 0, aborted: 0 };
  it('a completed move cools the node that received the copy, and its partition between the two nodes', () => {
    const r = recordEnded([tracked('q-1', 'n1', 'n4'), tracked('q-2', 'n2', 'n4')], [{ workflowId: 'reconfigure-q-1', runId: 'run-q-1', status: 'completed', detail: null }], { nodes: {}, partitions: {} }, counts, 100, config);
    expect(r.inFlight.map((m) => m.partition)).toEqual(['q-2']);
    expect(r.cooldowns).toEqual({ nodes: { n4: 1100 }, partitions: {}, moves: { 'q-1': [{ from: 'n1', to: 'n4', until: 5100 }] } });
    expect(r.counts).toEqual({ ...counts, completed: 1 });
  });
  it('a move a recovery aborted cools nothing, so the next tick plans it again', () => {
    const r = recordEnded([tracked('q-1', 'n1', 'n4')], [{ workflowId: 'reconfigure-q-1', runId: 'run-q-1', status: 'aborted', detail: 'pending recovery' }], { nodes: {}, partitions: {} }, counts, 100, config);
    expect(r.inFlight).toEqual([]);
    expect(r.cooldowns).toEqual({ nodes: {}, partitions: {}, moves: {} });
    expect(r.counts.aborted).toBe(1);
  });
  it('an ended run of an earlier move on the partition is not taken for the tracked one', () => {
    const r = recordEnded([tracked('q-1', 'n1', 'n4', 'new')], [{ workflowId: 'reconfigure-q-1', runId: 'old', status: 'completed', detail: null }], { nodes: {}, partitions: {} }, counts, 100, config);
    expect(r.inFlight).toHaveLength(1);
  });
  it('prunes cooldowns that ran out, and keeps an older run\'s whole-partition entries until they end', () => {
    const moves = { a: [{ from: 'n1', to: 'n2', until: 20 }], b: [{ from: null, to: 'n3', until: 15 }, { from: 'n3', to: 'n1', until: 40 }] };
    expect(pruneCooldowns({ nodes: { n1: 10, n2: 30 }, partitions: { a: 20, c: 25 }, moves }, 20)).toEqual({
      nodes: { n2: 30 },
      partitions: { c: 25 },
      moves: { b: [{ from: 'n3', to: 'n1', until: 40 }] },
    });
    // A state carried from an older run has no partition moves.
    expect(pruneCooldowns({ nodes: {}, partitions: { a: 30 } }, 20)).toEqual({ nodes: {}, partitions: { a: 30 }, moves: {} });
  });
  it('a reconfiguration that closed, whoever started it, sets the same cooldowns from when it closed', () => {
    const closed = [
      { partition: 'q-1', from: 'n1', to: 'n2', closedAt: 200 },
      { partition: 'q-1', from: 'n1', to: 'n2', closedAt: 300 },
      { partition: 'q-2', from: null, to: 'n3', closedAt: 100 },
    ];
    const start = { nodes: { n2: 5000 }, partitions: {}, moves: { 'q-1': [{ from: 'n1', to: 'n2', until: 400 }] } };
    expect(recordClosed(start, closed, config)).toEqual({
      nodes: { n2: 5000, n3: 1100 },
      partitions: {},
      // Listed on more than one look (the visibility slack): one entry, the latest end.
      moves: { 'q-1': [{ from: 'n1', to: 'n2', until: 5300 }], 'q-2': [{ from: null, to: 'n3', until: 5100 }] },
    });
    expect(start.moves['q-1']).toEqual([{ from: 'n1', to: 'n2', until: 400 }]);
  });
  it('lists closed reconfigurations from the last look less the visibility slack, never further back than a partition cooldown', () => {
    expect(closedListFrom(90_000, 100_000, { partitionCooldownMs: 300_000 })).toBe(75_000);
    expect(closedListFrom(undefined, 1_000_000, { partitionCooldownMs: 300_000 })).toBe(685_000);
    expect(closedListFrom(10_000, 1_000_000, { partitionCooldownMs: 300_000 })).toBe(685_000);
  });
});

describe('selectStarts: limits, one reconfiguration per partition, nodes left alone', () => {
  it('keeps the per-node limit on the receiving node, counting the moves in flight; a handoff copies nothing', () => {
    const inFlight: InFlightMove[] = [{ partition: 'q-9', op: 'follower_move', from: 'n1', to: 'n4', bytesRemaining: 10 }];
    const steps = [step('q-1', 'n2', 'n4'), step('q-2', 'n3', 'n4'), step('q-3', 'n4', 'n5'), step('q-4', 'n4', 'n5'), step('q-5', 'n1', 'n4', 'owner_handoff')];
    const s = selectStarts(steps, inFlight, { ...limits, maxTransfersPerCluster: 10 }, new Set());
    expect(s.start.map((p) => p.partition)).toEqual(['q-1', 'q-3', 'q-4', 'q-5']);
    expect(s.skipped).toEqual([{ partition: 'q-2', reason: 'n4 already receives 2 copies (the per-node transfer limit)' }]);
  });
  it('keeps the cluster limit', () => {
    const s = selectStarts([step('q-1', 'n1', 'n4'), step('q-2', 'n2', 'n5'), step('q-3', 'n3', 'n6'), step('q-4', 'n7', 'n8')], [], limits, new Set());
    expect(s.start).toHaveLength(3);
    expect(s.skipped[0]!.reason).toMatch(/cluster limit of 3/);
  });
  it('starts nothing on a partition with a change in flight, nor twice on one partition', () => {
    const inFlight: InFlightMove[] = [{ partition: 'q-1', op: 'follower_move', from: null, to: 'n4', bytesRemaining: 10 }];
    const s = selectStarts([step('q-1', 'n2', 'n5'), step('q-2', 'n2', 'n5'), step('q-2', 'n3', 'n6', 'owner_handoff')], inFlight, { ...limits, maxTransfersPerCluster: 10 }, new Set());
    expect(s.start.map((p) => `${p.partition}:${p.from}`)).toEqual(['q-2:n2']);
    expect(s.skipped.map((x) => x.partition)).toEqual(['q-1', 'q-2']);
  });
  it('leaves draining nodes alone, and a drain keeps only its own steps', () => {
    const steps = [step('q-1', 'n6', 'n4'), step('q-2', 'n2', 'n6'), step('q-3', 'n2', 'n4')];
    const loop = selectStarts(steps, [], { ...limits, maxTransfersPerCluster: 10 }, new Set(['n6']));
    expect(loop.start.map((p) => p.partition)).toEqual(['q-3']);
    expect(loop.skipped.map((x) => x.reason)).toEqual(['n6 is draining: the rebalancer leaves it alone', 'n6 is draining: the rebalancer leaves it alone']);
    const drain = selectStarts(steps, [], { ...limits, maxTransfersPerCluster: 10 }, new Set(), (p) => p.from === 'n6');
    expect(drain.start.map((p) => p.partition)).toEqual(['q-1']);
  });
});

describe('inFlightMoves and recoveryPending', () => {
  it('counts tracked moves with their source and changes the topology shows, with bytes from the sync budget', () => {
    const t = topology([node('n1'), node('n2'), node('n3'), node('n4')], [
      partition('q-1', 'n1', ['n2', 'n3'], { learners: ['n4'] }),
      partition('q-2', 'n1', ['n2', 'n4'], { leaving: 'n3', boundary: { offset: 5, joined: 'n4', leaving: 'n3', epoch: 1 } }),
      partition('q-3', 'n1', ['n2', 'n3'], { admission: 'closed' }),
      partition('q-4', 'n1', ['n2', 'n3']),
    ]);
    const moves = inFlightMoves(t, [tracked('q-1', 'n3', 'n4'), tracked('q-4', 'n2', 'n4')], [{ partition: 'q-1', node: 'n4', kind: 'rebalance', bytesRemaining: 77, pausedForRecovery: false }]);
    expect(moves).toEqual([
      { partition: 'q-1', op: 'follower_move', from: 'n3', to: 'n4', bytesRemaining: 77 },
      // Started, learner not added yet: all its bytes are still to copy.
      { partition: 'q-4', op: 'follower_move', from: 'n2', to: 'n4', bytesRemaining: 500 },
      { partition: 'q-2', op: 'follower_move', from: 'n3', to: 'n4', bytesRemaining: 0 },
      { partition: 'q-3', op: 'owner_handoff', from: 'n1', to: 'n1', bytesRemaining: 0 },
    ]);
  });
  it('names pending recoveries', () => {
    const t = topology([node('n1')], [partition('q-1', 'n1', [], { pendingRecovery: { epoch: 3, openedAt: 0, reason: 'x', failedOwner: 'n1' } }), partition('q-2', 'n1', [])]);
    expect(recoveryPending(t)).toBe('recovery pending on q-1 (n1 failed in epoch 3)');
    expect(recoveryPending(topology([node('n1')], [partition('q-2', 'n1', [])]))).toBeNull();
  });
});

describe('checkDrain: refused up front', () => {
  const nodes = [node('n1'), node('n2'), node('n3'), node('n4')];
  it('accepts a node whose copies all have somewhere to go', () => {
    expect(checkDrain(topology(nodes, [partition('q-1', 'n1', ['n2', 'n3'])]), 'n1')).toEqual({ ok: true });
  });
  it('refuses an unknown node, naming the known ones', () => {
    expect(checkDrain(topology(nodes, []), 'n9')).toMatchObject({ ok: false, code: 'unknown_node', message: 'node n9 is not in the cluster; its nodes are n1, n2, n3, n4' });
  });
  it('says how many copies have nowhere to go', () => {
    const t = topology(nodes, [partition('q-1', 'n1', ['n2', 'n3', 'n4']), partition('q-2', 'n1', ['n2', 'n3']), partition('q-3', 'n2', ['n1', 'n3', 'n4'])]);
    expect(checkDrain(t, 'n1')).toMatchObject({ ok: false, code: 'not_enough_room', message: expect.stringMatching(/^the other nodes cannot hold every copy on n1: 2 of its 3 copies have nowhere to go/) });
  });
  it('does not count a down or draining node as room', () => {
    const t = topology([node('n1'), node('n2'), node('n3'), node('n4', { live: false }), node('n5', { draining: true })], [partition('q-1', 'n2', ['n1', 'n3'])]);
    expect(checkDrain(t, 'n1')).toMatchObject({ ok: false, code: 'not_enough_room' });
  });
  it('with zones, counts the shortfall per zone: copies of one partition stay in distinct zones', () => {
    const zoned = [node('n1', { zone: 'a' }), node('n2', { zone: 'b' }), node('n3', { zone: 'c' }), node('n4', { zone: 'b' }), node('n5', { zone: 'c' })];
    const t = topology(zoned, [partition('q-1', 'n1', ['n2', 'n3']), partition('q-2', 'n2', ['n1', 'n3']), partition('q-3', 'n2', ['n3'])]);
    const check = checkDrain(t, 'n1');
    expect(check).toMatchObject({ ok: false, code: 'not_enough_room' });
    expect(!check.ok && check.message).toMatch(/2 of its 2 copies have nowhere to go .*short per zone: a 2/);
    expect(checkDrain(t, 'n3')).toEqual({ ok: true });
  });
  it('refuses a node owning a partition with no follower to hand the owner role to', () => {
    expect(checkDrain(topology(nodes, [partition('q-1', 'n1', [])]), 'n1')).toMatchObject({ ok: false, code: 'no_follower', message: expect.stringMatching(/n1 owns q-1 with no follower/) });
  });
});

describe('drainLeft', () => {
  it('counts partitions, owned ones and their bytes on the node', () => {
    const t = topology([node('n1'), node('n2'), node('n3'), node('n4')], [
      partition('q-1', 'n1', ['n2']),
      partition('q-2', 'n2', ['n3'], { learners: ['n1'], historyBytes: 50 }),
      partition('q-3', 'n2', ['n3']),
    ]);
    expect(drainLeft(t, 'n1')).toEqual({ partitionsLeft: 2, ownedLeft: 1, bytesLeft: 1050 });
  });
});

describe('drainStarts: owners first, only steps off the drained node', () => {
  const steps = [step('q-1', 'n1', 'n4'), step('q-2', 'n1', 'n2', 'owner_handoff'), step('q-3', 'n2', 'n4'), step('q-4', 'n1', 'n5')];
  it('while the node owns a partition, only handoffs off it start', () => {
    expect(drainStarts(steps, [], { ...limits, maxTransfersPerCluster: 10 }, 'n1', true).start.map((p) => p.partition)).toEqual(['q-2']);
  });
  it('then only follower moves off it', () => {
    expect(drainStarts(steps, [], { ...limits, maxTransfersPerCluster: 10 }, 'n1', false).start.map((p) => p.partition)).toEqual(['q-1', 'q-4']);
  });
});

describe('planInputFor: the loop plans the rest of the cluster while a drain runs', () => {
  // n1 is draining and holds a copy of q-0..q-5; q-6..q-11 sit on n2..n4 only; n5 joined empty.
  const nodes = [node('n1', { draining: true }), ...['n2', 'n3', 'n4', 'n5'].map((id) => node(id))];
  const parts = [
    ...[0, 1, 2, 3, 4, 5].map((i) => partition(`q-${i}`, i % 2 === 0 ? 'n1' : 'n2', i % 2 === 0 ? ['n2', 'n3'] : ['n1', 'n3'])),
    ...[6, 7, 8, 9, 10, 11].map((i) => (i % 2 === 0 ? partition(`q-${i}`, 'n2', ['n3', 'n4']) : partition(`q-${i}`, 'n3', ['n4', 'n2']))),
  ];
  const t = topology(nodes, parts);
  const config = { ...DEFAULT_PLANNER_CONFIG, maxTransfersPerCluster: 3 };
  const request = { inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: 1000 };

  it('holds the partitions with a copy on a node another drain empties, and none the caller drains itself', () => {
    expect(heldByDrains(t, [])).toEqual(['q-0', 'q-1', 'q-2', 'q-3', 'q-4', 'q-5']);
    expect(heldByDrains(t, ['n1'])).toEqual([]);
    expect(heldByDrains(topology(nodes.map((n) => ({ ...n, draining: false })), parts), [])).toEqual([]);
  });

  it("spends the loop's transfer slots on the rest of the cluster, never on the drained node", () => {
    // Without the hold, every slot goes to a move off n1 that the loop leaves to the drain.
    expect(planNow({ ...request, topology: t }, config).steps.every((s) => s.from === 'n1')).toBe(true);
    const plan = planNow(planInputFor(t, request), config);
    expect(plan.steps.length).toBeGreaterThan(0);
    for (const s of plan.steps) {
      expect([s.from, s.to]).not.toContain('n1');
      expect(Number(s.partition.slice(2))).toBeGreaterThanOrEqual(6);
    }
    expect(plan.steps.some((s) => s.to === 'n5')).toBe(true);
  });

  it("leaves a drain's own plan as it was: it moves the copies off its node", () => {
    const input = planInputFor(t, { ...request, draining: ['n1'] });
    expect(input.cooldowns).toEqual(request.cooldowns);
    expect(planNow(input, config).steps.every((s) => s.from === 'n1')).toBe(true);
  });
});
