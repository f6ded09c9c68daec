import { describe, expect, it } from 'vitest';
import type { Node, Partition, Topology } from '../../cluster/contract';
import type { InFlightMove, Proposal } from '../../planner/types';
import type { TrackedMove } from '../../rules/definitions';
import { DEFAULT_PLANNER_CONFIG, planNow } from '../../planner';
import { blockerLine, checkDrain, drainBlockers, drainLeft, drainStarts, heldByDrains, planInputFor } from '../../rules/rebalancer-drain-rules';
import { checkOperatorNote, closedListFrom, inFlightMoves, cooldownsOnArrival, nodeArrived, pruneCooldowns, recordClosed, recordEnded, recoveryPending, selectStarts } from '../../rules/rebalancer-rules';

const node = (id: string, over: Partial<Node> = {}): Node => ({
  id, processId: `${id}-p1`, storageInstance: `${id}-s1`, live: true, downSince: null, capacity: 1, zone: 'z1', publishRate: 0, deliveryRate: 0, draining: false, ...over,
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
    // Listed again after a node arrived at 250: what closed before it cools no node, its partition still.
    expect(recordClosed({ nodes: {}, partitions: {} }, closed, config, 250)).toEqual({
      nodes: { n2: 1300 },
      partitions: {},
      moves: { 'q-1': [{ from: 'n1', to: 'n2', until: 5300 }], 'q-2': [{ from: null, to: 'n3', until: 5100 }] },
    });
  });
  it('lists closed reconfigurations from the last look less the visibility slack, never further back than a partition cooldown', () => {
    expect(closedListFrom(90_000, 100_000, { partitionCooldownMs: 300_000 })).toBe(75_000);
    expect(closedListFrom(undefined, 1_000_000, { partitionCooldownMs: 300_000 })).toBe(685_000);
    expect(closedListFrom(10_000, 1_000_000, { partitionCooldownMs: 300_000 })).toBe(685_000);
  });
});

describe('a node arriving lifts the node cooldowns', () => {
  it('sees a node join those the mean is over, none when either look is unknown', () => {
    expect(nodeArrived(['n1', 'n2', 'n3'], ['n1', 'n2', 'n3', 'n4'])).toBe(true);
    expect(nodeArrived(['n1', 'n2', 'n4'], ['n1', 'n2'])).toBe(false);
    expect(nodeArrived(undefined, ['n1'])).toBe(false);
    expect(nodeArrived(['n1'], undefined)).toBe(false);
  });
  it('keeps the partition cooldowns, so no copy goes back and forth, and changes nothing without an arrival', () => {
    const moves = { 'q-1': [{ from: 'n4', to: 'n3', until: 500 }] };
    const c = { nodes: { n3: 500 }, partitions: { 'q-2': 400 }, moves };
    expect(cooldownsOnArrival(c, ['n1', 'n3'], ['n1', 'n3', 'n4'])).toEqual({ nodes: {}, partitions: { 'q-2': 400 }, moves });
    expect(cooldownsOnArrival(c, ['n1', 'n3', 'n4'], ['n1', 'n3'])).toBe(c);
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
    const moves = inFlightMoves(t.partitions, [tracked('q-1', 'n3', 'n4'), tracked('q-4', 'n2', 'n4')], [{ partition: 'q-1', node: 'n4', kind: 'rebalance', bytesRemaining: 77, pausedForRecovery: false }]);
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
    expect(recoveryPending(t.partitions)).toBe('recovery pending on q-1 (n1 failed in epoch 3)');
    expect(recoveryPending(topology([node('n1')], [partition('q-2', 'n1', [])]).partitions)).toBeNull();
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
  it("with zones, drains a zone's only node into the emptiest zones left: zones narrow where a copy goes, never whether", () => {
    const zoned = [node('n1', { zone: 'a' }), node('n2', { zone: 'b' }), node('n3', { zone: 'c' }), node('n4', { zone: 'b' }), node('n5', { zone: 'c' })];
    const t = topology(zoned, [partition('q-1', 'n1', ['n2', 'n3']), partition('q-2', 'n2', ['n1', 'n3']), partition('q-3', 'n2', ['n3'])]);
    expect(checkDrain(t, 'n1')).toEqual({ ok: true });
    // Every zone left full of q-1's copies: 3 copies over b and c, 2 and 1.
    const bbb = [node('n1', { zone: 'a' }), node('n2', { zone: 'b' }), node('n3', { zone: 'b' }), node('n5', { zone: 'b' })];
    expect(checkDrain(topology(bbb, [partition('q-1', 'n1', ['n2', 'n3'])]), 'n1')).toEqual({ ok: true });
  });
  it('with zones, refuses only when the nodes run out, not the zones', () => {
    const zoned = [node('n1', { zone: 'a' }), node('n2', { zone: 'b' }), node('n3', { zone: 'c' })];
    const check = checkDrain(topology(zoned, [partition('q-1', 'n1', ['n2', 'n3'])]), 'n1');
    expect(check).toMatchObject({ ok: false, code: 'not_enough_room' });
    expect(!check.ok && check.message).toMatch(/1 of its 1 copies have nowhere to go \(no live node that is not draining and holds no copy of the partition\); add nodes first/);
  });
  it('does not count a change in flight as a copy that stays: a move leaving the node needs no room elsewhere', () => {
    const zoned = [node('n1', { zone: 'a' }), node('n2', { zone: 'b' }), node('n3', { zone: 'c' }), node('n4', { zone: 'a' }), node('n5', { zone: 'b' })];
    // q-1's copy has moved from n2 to n5 (swapped, n2 leaving): the copies that stay fill every zone, yet n2 may be drained.
    const moved = partition('q-1', 'n1', ['n3', 'n5'], { leaving: 'n2' });
    expect(checkDrain(topology(zoned, [moved]), 'n2')).toEqual({ ok: true });
  });
  it('refuses a node owning a partition with no follower to hand the owner role to', () => {
    expect(checkDrain(topology(nodes, [partition('q-1', 'n1', [])]), 'n1')).toMatchObject({ ok: false, code: 'no_follower', message: expect.stringMatching(/n1 owns q-1 with no follower/) });
  });
  // s-0 on n1 (its follower) and s-1 owned by n1 without a follower: neither may move, and room is no help.
  const streams = [partition('q-1', 'n1', ['n2']), partition('s-0', 'n2', ['n1', 'n3'], { kind: 'stream' }), partition('s-1', 'n1', [], { kind: 'stream' }), partition('s-2', 'n2', ['n3'], { kind: 'stream' })];
  it('refuses a node holding a stream copy, naming each stream it holds and the way out', () => {
    const check = checkDrain(topology(nodes, streams), 'n1');
    expect(check).toMatchObject({ ok: false, code: 'unmovable_copies' });
    expect(!check.ok && check.message).toBe(
      'n1 holds a copy of the streams s-0, s-1, which cannot move (streams need their own seal and selection path), so the drain could never end; ' +
        'drain with --queues-only (queuesOnly: true) to move every queue copy off n1 and leave the streams there',
    );
    expect(checkDrain(topology(nodes, streams), 'n4')).toEqual({ ok: true });
  });
  it('with queues only, accepts it and checks the queue copies alone', () => {
    expect(checkDrain(topology(nodes, streams), 'n1', true)).toEqual({ ok: true });
    const noRoom = [...streams, partition('q-2', 'n2', ['n1', 'n3', 'n4'])];
    expect(checkDrain(topology(nodes, noRoom), 'n1', true)).toMatchObject({ ok: false, code: 'not_enough_room', message: expect.stringMatching(/1 of its 2 copies have nowhere to go/) });
  });
});

describe('drainLeft', () => {
  it('counts partitions, owned ones and their bytes on the node', () => {
    const t = topology([node('n1'), node('n2'), node('n3'), node('n4')], [
      partition('q-1', 'n1', ['n2']),
      partition('q-2', 'n2', ['n3'], { learners: ['n1'], historyBytes: 50 }),
      partition('q-3', 'n2', ['n3']),
    ]);
    expect(drainLeft(t, 'n1')).toEqual({ partitionsLeft: 2, ownedLeft: 1, bytesLeft: 1050, streams: [] });
  });
  it('leaves out the streams, which no drain moves, and lists them', () => {
    const t = topology([node('n1'), node('n2')], [partition('q-1', 'n2', ['n1']), partition('s-0', 'n1', ['n2'], { kind: 'stream', historyBytes: 7 })]);
    expect(drainLeft(t, 'n1')).toEqual({ partitionsLeft: 1, ownedLeft: 0, bytesLeft: 1000, streams: ['s-0'] });
  });
});

describe('drainBlockers: what holds the copies left, and whether the wait ends by itself', () => {
  const n = [node('n1', { draining: true }), node('n2'), node('n3'), node('n4')];
  const why = (t: Topology, over: { planned?: Proposal[]; inFlight?: InFlightMove[]; queuesOnly?: boolean } = {}) =>
    drainBlockers(t, 'n1', over.planned ?? [], over.inFlight ?? [], limits, over.queuesOnly ?? false).map((b) => ({ line: blockerLine(b), passes: b.passes }));

  it('names nothing for a copy the plan moves or a move of it in flight', () => {
    const t = topology(n, [partition('q-1', 'n2', ['n1', 'n3']), partition('q-2', 'n2', ['n1', 'n3'])]);
    const moving: InFlightMove = { partition: 'q-2', op: 'follower_move', from: 'n1', to: 'n4', bytesRemaining: 5 };
    expect(why(t, { planned: [step('q-1', 'n1', 'n4')], inFlight: [moving] })).toEqual([]);
  });
  it('a stream copy never passes by itself, unless the drain empties the queues only', () => {
    const t = topology(n, [partition('s-0', 'n2', ['n1', 'n3'], { kind: 'stream' })]);
    expect(why(t)).toEqual([{ line: 's-0: a stream: streams do not move yet; this does not pass by itself: undrain n1, then drain it with --queues-only', passes: false }]);
    expect(why(t, { queuesOnly: true })).toEqual([]);
  });
  it('a pending recovery and a change in flight pass by themselves', () => {
    const t = topology(n, [
      partition('q-1', 'n2', ['n1', 'n3'], { pendingRecovery: { epoch: 3, openedAt: 0, reason: 'owner failed', failedOwner: 'n2' } }),
      partition('q-2', 'n2', ['n1', 'n3'], { learners: ['n4'] }),
      partition('q-3', 'n2', ['n1', 'n3'], { admission: 'closed' }),
    ]);
    expect(why(t)).toEqual([
      { line: 'q-1: a pending recovery (n2 failed in epoch 3): rebalancing and drains wait until it activates', passes: true },
      { line: 'q-2: a change in flight on the partition (learner n4 catching up): the copy moves once it ends', passes: true },
      { line: 'q-3: a change in flight on the partition (admission closed for a handoff): the copy moves once it ends', passes: true },
    ]);
  });
  it('an owner whose only followers are down waits for good and says what would end it; a suspended copy on a down node holds nothing up', () => {
    const down = [node('n1', { draining: true }), node('n2', { live: false }), node('n3', { live: false }), node('n4')];
    const suspended = { node: 'n3', processId: 'n3-p1', storageInstance: 'n3-s1', suspended: true };
    const t = topology(down, [partition('q-1', 'n1', ['n2', 'n3']), partition('q-2', 'n4', ['n1', 'n3'], { history: [suspended] })]);
    expect(why(t)).toEqual([
      { line: 'q-1: no admitted follower to hand the owner role to; this does not pass by itself: its followers are on n2 and n3, down: bring n2 and n3 back', passes: false },
      // The loop repairs n3's copy; what holds q-2 here is the room for n1's.
      {
        line: 'q-2: no node can take the copy: every live node that is not draining holds a copy of the partition; this does not pass by itself: add a node, or bring n2 back',
        passes: false,
      },
    ]);
  });
  it('a follower copy no node can take waits for good; one whose receivers are busy waits for the transfer budget', () => {
    const t = topology([...n, node('n5', { live: false })], [partition('q-1', 'n2', ['n1', 'n3', 'n4']), partition('q-2', 'n2', ['n1', 'n3'])]);
    const busy: InFlightMove[] = [0, 1].map((i) => ({ partition: `q-9${i}`, op: 'follower_move', from: 'n2', to: 'n4', bytesRemaining: 5 }));
    expect(why(t, { inFlight: busy })).toEqual([
      {
        line: 'q-1: no node can take the copy: every live node that is not draining holds a copy of the partition; this does not pass by itself: add a node, or bring n5 back',
        passes: false,
      },
      { line: 'q-2: the transfer budget on n4, the node that could take the copy, is in use (2 transfers each)', passes: true },
    ]);
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

  it("gives the loop's own reason when it proposes nothing, not what the drain beside it waits on", () => {
    // n2..n4 even but for q-0, which the drain holds: the loop has nothing to do, and says so in its own words.
    const even = [partition('q-0', 'n1', ['n2', 'n3']), partition('q-1', 'n2', ['n3', 'n4']), partition('q-2', 'n3', ['n4', 'n2']), partition('q-3', 'n4', ['n2', 'n3'])];
    const plan = planNow(planInputFor(topology(nodes.slice(0, 4), even), request), config);
    expect(plan.steps).toEqual([]);
    expect(plan.idleReason).toMatch(/^n4 is [\d.]+ below the mean but no copy it lacks may move to it now/);
  });

  it("leaves a drain's own plan as it was: it moves the copies off its node", () => {
    const input = planInputFor(t, { ...request, draining: ['n1'] });
    expect(input.cooldowns).toEqual(request.cooldowns);
    expect(planNow(input, config).steps.every((s) => s.from === 'n1')).toBe(true);
  });
});
