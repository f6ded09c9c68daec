import { describe, expect, it } from 'vitest';
import type { Node, Partition } from '../../cluster/contract';
import { checkFollowerMove, classifyRemovalRefusal, TargetWatch } from '../../rules/follower-move-rules';

const node = (id: string, over: Partial<Node> = {}): Node => ({
  id, processId: `${id}-p1`, storageInstance: `${id}-s1`, live: true, downSince: null, capacity: 1, zone: 'z1', publishRate: 0, deliveryRate: 0, draining: false, ...over,
});
const nodes = [node('n1'), node('n2'), node('n3'), node('n4'), node('n5', { live: false }), node('n6', { draining: true })];
const partition = (over: Partial<Partition> = {}): Partition => ({
  id: 'q-0', kind: 'queue', owner: 'n1', followers: ['n2', 'n3'], learners: [], leaving: null, epoch: 1, generation: 1,
  replicationFactor: 3, durability: { mode: 'majority_durable' }, writeRequirement: 2, history: [], pendingRecovery: null,
  admission: 'open', boundary: null, retainedCopies: [], historyBytes: 0, publishRate: 0, deliveryRate: 0, ...over,
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

describe('TargetWatch: is T\'s transfer alive', () => {
  /** T copying a checkpoint; stalledSince as the broker says it (undefined: a broker that never says). */
  const checkpoint = (bytesRemaining: number, stalledSince?: number | null) =>
    ({ durableOffset: 0, bytesRemaining, phase: 'checkpoint' as const, stalledSince });

  it('never calls a checkpoint stalled while the broker says it progresses, however flat the durable offset', () => {
    const w = new TargetWatch(false, 0);
    for (let t = 0; t <= 600_000; t += 60_000) w.note(checkpoint(1_000_000 - t, null), t);
    expect(w.stalledFor(600_000)).toBe(0);
    expect(w.stalledAtBroker).toBe(false);
  });

  it('takes the broker\'s stall verdict, from when it says the stall began, even while bytes seem to fall', () => {
    const w = new TargetWatch(false, 0);
    w.note(checkpoint(1_000, null), 1_000);
    w.note(checkpoint(900, 5_000), 8_000);
    w.note(checkpoint(800, 7_000), 9_000);
    expect(w.stalledAtBroker).toBe(true);
    expect(w.stalledFor(12_000)).toBe(7_000);
    w.note(checkpoint(700, null), 13_000);
    expect(w.stalledFor(20_000)).toBe(0);
  });

  it('without a broker verdict, counts falling bytes and an advancing phase as progress on its own clock', () => {
    const w = new TargetWatch(false, 0);
    w.note(checkpoint(1_000, undefined), 0);
    w.note(checkpoint(900, undefined), 5_000);
    expect(w.stalledFor(6_000)).toBe(1_000);
    w.note(checkpoint(950, undefined), 7_000);
    expect(w.stalledFor(8_000)).toBe(3_000);
    w.note({ durableOffset: 0, bytesRemaining: 950, phase: 'tail' }, 9_000);
    expect(w.stalledFor(10_000)).toBe(1_000);
    w.note({ durableOffset: 10, bytesRemaining: 950 }, 11_000);
    expect(w.stalledFor(11_500)).toBe(500);
  });

  it('does not count time paused for recovery toward the stall or the catch-up deadline', () => {
    const w = new TargetWatch(false, 0);
    w.note(checkpoint(1_000, 1_000), 1_000);
    w.note({ ...checkpoint(1_000, 1_000), pausedForRecovery: true }, 2_000);
    expect(w.paused).toBe(true);
    expect(w.stalledAtBroker).toBe(false);
    expect(w.stalledFor(50_000)).toBe(0);
    expect(w.pausedFor(50_000)).toBe(48_000);
    w.note(checkpoint(1_000, 1_000), 60_000);
    expect(w.pausedFor(70_000)).toBe(58_000);
    // The stall clock starts again when the pause ends, not when the broker's stall began.
    expect(w.stalledFor(70_000)).toBe(10_000);
    w.restart(80_000);
    expect(w.pausedFor(90_000)).toBe(0);
  });

  it('keeps the first rule for moves started before the patch: only a rising durable offset is progress', () => {
    const w = new TargetWatch(true, 0);
    w.note(checkpoint(1_000, null), 0);
    w.note({ ...checkpoint(10, null), phase: 'tail', pausedForRecovery: true }, 5_000);
    expect(w.stalledFor(9_000)).toBe(9_000);
    expect(w.pausedFor(9_000)).toBe(0);
    w.note({ durableOffset: 5, bytesRemaining: 10 }, 9_000);
    expect(w.stalledFor(10_000)).toBe(1_000);
  });
});

describe('classifyRemovalRefusal', () => {
  it.each([
    ['generation_mismatch', {}, 'passing'],
    ['injected', {}, 'passing'],
    ['boundary_not_covered', {}, 'passing'],
    ['pending_recovery', {}, 'passing'],
    ['change_in_flight', { node: 'n5' }, 'passing'],
    ['admission_closed', {}, 'passing'],
    ['node_down', { node: 'n4' }, 'target_down'],
    ['node_down', {}, 'target_down'],
    ['node_down', { node: 'n5' }, 'final'],
    ['not_leaving', {}, 'not_leaving'],
    ['not_a_queue', {}, 'final'],
    ['unknown_node', { node: 'n2' }, 'final'],
    ['no_sync_budget', {}, 'final'],
  ])('%s %j is %s', (code, saw, kind) => {
    expect(classifyRemovalRefusal({ code, saw }, 'n4')).toBe(kind);
  });
});
