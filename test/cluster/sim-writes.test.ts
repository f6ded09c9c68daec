/**
 * Guarded writes at the core level: each write's effect, and each precondition's typed refusal leaving the
 * partition record untouched. (The conformance suite checks the same refusals over HTTP.)
 */
import { describe, expect, it } from 'vitest';
import type { GuardedWriteName, RefusalCode } from '../../cluster/contract';
import type { ClusterSim } from '../../cluster/sim/sim';
import { makeSim, record, untilAdmitted, write } from './helpers';

function refused<N extends GuardedWriteName>(
  sim: ClusterSim,
  partition: string,
  name: N,
  body: Parameters<typeof write<N>>[3],
  code: RefusalCode,
): Record<string, unknown> {
  const before = record(sim, partition);
  const r = write(sim, partition, name, body);
  if (r.ok) throw new Error(`${name} was accepted, expected ${code}`);
  expect(r.refusal.code).toBe(code);
  expect(record(sim, partition)).toBe(before);
  return r.refusal.saw;
}

function events(sim: ClusterSim): string[] {
  return sim.takeChanges().events.map((e) => e.event.type);
}

/** q-0 with n5 admitted as a learner. */
function withAdmittedLearner(config = {}): ClusterSim {
  const sim = makeSim(config);
  expect(write(sim, 'q-0', 'add-learner', { node: 'n5' }).ok).toBe(true);
  untilAdmitted(sim, 'q-0', 'n5');
  return sim;
}

describe('every write', () => {
  it('refuses streams, pending recoveries, stale generations and injected faults', () => {
    const sim = makeSim();
    refused(sim, 's-0', 'add-learner', { node: 'n5' }, 'not_a_queue');
    sim.fault({ fault: 'refuse-next-write', partition: 'q-0', write: 'add-learner' });
    expect(refused(sim, 'q-0', 'add-learner', { node: 'n5' }, 'injected')).toEqual({ fault: 'refuse-next-write' });
    const before = record(sim, 'q-0');
    const stale = sim.write('q-0', 'add-learner', { expectedGeneration: 99, idempotencyKey: 'x', node: 'n5' });
    expect(stale.ok === false && stale.refusal.saw).toEqual({ expected: 99, current: 1 });
    expect(record(sim, 'q-0')).toBe(before);
    sim.fault({ fault: 'fail-owner', partition: 'q-0' });
    refused(sim, 'q-0', 'add-learner', { node: 'n5' }, 'pending_recovery');
    refused(sim, 'q-0', 'reopen-admission', {}, 'pending_recovery');
  });

  it('bumps the partition and topology generations and emits assignment_changed', () => {
    const sim = makeSim();
    const g = sim.generation;
    const r = write(sim, 'q-0', 'add-learner', { node: 'n5' });
    expect(r.ok && r.partition.generation).toBe(2);
    expect(sim.generation).toBe(g + 1);
    expect(events(sim)).toContain('assignment_changed');
  });
});

describe('add-learner', () => {
  it('adds a learner that takes a transfer slot, catches up and is admitted by the cluster', () => {
    const sim = makeSim();
    const r = write(sim, 'q-0', 'add-learner', { node: 'n5' });
    expect(r.ok && r.partition.learners).toEqual(['n5']);
    expect(sim.syncBudget().transfers).toEqual([expect.objectContaining({ partition: 'q-0', node: 'n5', kind: 'rebalance' })]);
    expect(sim.progress('q-0').replicas.find((x) => x.node === 'n5')?.phase).toBe('checkpoint');
    sim.takeChanges();
    untilAdmitted(sim, 'q-0', 'n5');
    const p = sim.partition('q-0');
    expect(p.learners).toEqual(['n5']);
    expect(p.history.map((h) => h.node)).toContain('n5');
    expect(p.writeRequirement).toBe(2);
    expect(sim.syncBudget().clusterInUse).toBe(0);
    expect(events(sim)).toContain('admitted');
  });

  it('refuses unknown, down and draining nodes, existing replicas, a second change and an empty budget', () => {
    const sim = makeSim({ perNodeLimit: 1 });
    refused(sim, 'q-0', 'add-learner', { node: 'n99' }, 'unknown_node');
    sim.fault({ fault: 'crash-node', node: 'n6' });
    refused(sim, 'q-0', 'add-learner', { node: 'n6' }, 'node_down');
    sim.fault({ fault: 'set-draining', node: 'n4', draining: true });
    refused(sim, 'q-0', 'add-learner', { node: 'n4' }, 'node_draining');
    sim.fault({ fault: 'set-draining', node: 'n4', draining: false });
    expect(refused(sim, 'q-0', 'add-learner', { node: 'n2' }, 'already_a_replica')).toEqual({ node: 'n2', role: 'follower' });
    expect(write(sim, 'q-0', 'add-learner', { node: 'n5' }).ok).toBe(true);
    refused(sim, 'q-0', 'add-learner', { node: 'n4' }, 'change_in_flight');
    const saw = refused(sim, 'q-1', 'add-learner', { node: 'n5' }, 'no_sync_budget');
    expect(saw).toMatchObject({ node: 'n5', inUse: 1, limit: 1, clusterInUse: 1, clusterLimit: 8 });
  });

  it('starts from a retained copy when the node had one', () => {
    const sim = withAdmittedLearner();
    expect(write(sim, 'q-0', 'drop-learner', { node: 'n5' }).ok).toBe(true);
    const kept = sim.partition('q-0').retainedCopies[0]!;
    expect(kept.node).toBe('n5');
    expect(write(sim, 'q-0', 'add-learner', { node: 'n5' }).ok).toBe(true);
    expect(sim.progress('q-0').replicas.find((r) => r.node === 'n5')!.durableOffset).toBeGreaterThan(0);
    expect(sim.partition('q-0').retainedCopies).toEqual([]);
  });
});

describe('drop-learner', () => {
  it('removes the learner (and its admission), keeps its data as a retained copy, frees the slot', () => {
    const sim = makeSim();
    write(sim, 'q-0', 'add-learner', { node: 'n5' });
    const r = write(sim, 'q-0', 'drop-learner', { node: 'n5' });
    expect(r.ok && r.partition.learners).toEqual([]);
    expect(sim.syncBudget().clusterInUse).toBe(0);
    expect(sim.partition('q-0').retainedCopies.map((c) => c.node)).toEqual(['n5']);
    const admitted = withAdmittedLearner();
    write(admitted, 'q-0', 'drop-learner', { node: 'n5' });
    expect(admitted.partition('q-0').history.map((h) => h.node)).not.toContain('n5');
  });

  it('refuses a node that is not a learner', () => {
    refused(makeSim(), 'q-0', 'drop-learner', { node: 'n2' }, 'not_a_learner');
  });

  it('lets retained copies expire after the grace period', () => {
    const sim = makeSim({ retainGraceMs: 1_000 });
    write(sim, 'q-0', 'add-learner', { node: 'n5' });
    write(sim, 'q-0', 'drop-learner', { node: 'n5' });
    sim.advance(900);
    expect(sim.partition('q-0').retainedCopies).toHaveLength(1);
    sim.advance(200);
    expect(sim.partition('q-0').retainedCopies).toHaveLength(0);
  });
});

describe('swap', () => {
  it('makes the learner count, marks the follower leaving and returns the boundary (the confirmed tail)', () => {
    const sim = withAdmittedLearner();
    const confirmed = sim.progress('q-0').confirmedTail;
    const r = write(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' });
    if (!r.ok) throw new Error(r.refusal.message);
    expect(r.boundary).toBe(confirmed);
    expect(r.partition).toMatchObject({ followers: ['n2', 'n5'], learners: [], leaving: 'n3', writeRequirement: 2 });
    expect(r.partition.boundary).toMatchObject({ offset: confirmed, joined: 'n5', leaving: 'n3', epoch: 1 });
    expect(r.partition.history.map((h) => h.node)).toContain('n3');
  });

  it('refuses non-learners, unadmitted or lagging learners, non-followers and closed admission', () => {
    const sim = makeSim();
    refused(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' }, 'not_a_learner');
    write(sim, 'q-0', 'add-learner', { node: 'n5' });
    refused(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' }, 'not_admitted');
    untilAdmitted(sim, 'q-0', 'n5');
    refused(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n1' }, 'not_a_follower');
    refused(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n4' }, 'not_a_follower');
    sim.fault({ fault: 'stall-transfer', partition: 'q-0', node: 'n5', stalled: true });
    sim.publish('q-0', 500);
    sim.advance(200);
    expect(refused(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' }, 'not_caught_up')).toMatchObject({ node: 'n5', slack: 20 });

    const closed = makeSim();
    write(closed, 'q-0', 'close-admission', {});
    refused(closed, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' }, 'admission_closed');
  });
});

describe('remove-leaving', () => {
  function swapped(): ClusterSim {
    const sim = withAdmittedLearner();
    expect(write(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' }).ok).toBe(true);
    return sim;
  }

  it('removes the leaving replica once the joined copy covers the boundary and retains its data', () => {
    const sim = swapped();
    sim.advance(300);
    const r = write(sim, 'q-0', 'remove-leaving', { node: 'n3' });
    if (!r.ok) throw new Error(r.refusal.message);
    expect(r.partition).toMatchObject({ leaving: null, boundary: null, followers: ['n2', 'n5'] });
    expect(r.partition.history.map((h) => h.node)).toEqual(['n1', 'n2', 'n5']);
    expect(r.partition.retainedCopies).toEqual([
      expect.objectContaining({ node: 'n3', removedAt: sim.now, retainedUntil: sim.now + 600_000 }),
    ]);
    expect(sim.invariants().breaches).toEqual([]);
  });

  it('refuses a node that is not leaving, an uncovered boundary and a rejoin in flight', () => {
    const sim = makeSim();
    write(sim, 'q-0', 'add-learner', { node: 'n5' });
    untilAdmitted(sim, 'q-0', 'n5');
    // The learner stalls a little behind (within the slack) so the boundary is above it.
    sim.fault({ fault: 'stall-transfer', partition: 'q-0', node: 'n5', stalled: true });
    sim.publish('q-0', 10);
    sim.advance(200);
    write(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' });
    refused(sim, 'q-0', 'remove-leaving', { node: 'n2' }, 'not_leaving');
    const saw = refused(sim, 'q-0', 'remove-leaving', { node: 'n3' }, 'boundary_not_covered');
    expect(saw.boundary as number).toBeGreaterThan(saw.durable as number);
    sim.fault({ fault: 'stall-transfer', partition: 'q-0', node: 'n5', stalled: false });
    sim.advance(200);
    sim.fault({ fault: 'restart-node', node: 'n2' });
    expect(refused(sim, 'q-0', 'remove-leaving', { node: 'n3' }, 'change_in_flight')).toMatchObject({ rejoining: ['n2'] });
  });
});

describe('remove-leaving never blocks forever on a replica that is not rejoining (issue 7, rule 1)', () => {
  /** q-0: n5 swapped in for n3 and covering the boundary. */
  function covered(): ClusterSim {
    const sim = withAdmittedLearner();
    expect(write(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' }).ok).toBe(true);
    sim.advance(300);
    return sim;
  }

  function removedAndFree(sim: ClusterSim): void {
    const r = write(sim, 'q-0', 'remove-leaving', { node: 'n3' });
    if (!r.ok) throw new Error(`${r.refusal.code}: ${r.refusal.message}`);
    expect(r.partition).toMatchObject({ leaving: null, boundary: null, followers: ['n2', 'n5'] });
    expect(write(sim, 'q-0', 'add-learner', { node: 'n4' }).ok).toBe(true);
    sim.advance(2_000);
    expect(sim.invariants().breaches).toEqual([]);
  }

  it.each([
    ['R (n3) went down after a restart', 'n3'],
    ['another follower (n2) was restarted and then went down', 'n2'],
  ])('removes R when %s: suspended, never rejoining', (_, node) => {
    const sim = covered();
    sim.fault({ fault: 'restart-node', node });
    sim.fault({ fault: 'crash-node', node });
    expect(sim.partition('q-0').history.find((h) => h.node === node)?.suspended).toBe(true);
    removedAndFree(sim);
  });

  it('removes R when R lost its disk (R itself rejoining is no admission in flight)', () => {
    const sim = covered();
    sim.fault({ fault: 'lose-disk', node: 'n3' });
    expect(sim.partition('q-0').history.find((h) => h.node === 'n3')?.suspended).toBe(true);
    removedAndFree(sim);
  });


  it('waits for a follower that is actively rejoining, then removes R once it is re-admitted', () => {
    const sim = covered();
    sim.fault({ fault: 'restart-node', node: 'n2' });
    expect(refused(sim, 'q-0', 'remove-leaving', { node: 'n3' }, 'change_in_flight')).toMatchObject({ rejoining: ['n2'] });
    untilAdmitted(sim, 'q-0', 'n2');
    removedAndFree(sim);
  });
});

describe('a failed target never starts to count; R stays while T is down (issue 7, rule 2)', () => {
  it('refuses swap with the learner down, naming it', () => {
    const sim = withAdmittedLearner();
    sim.fault({ fault: 'crash-node', node: 'n5' });
    const saw = refused(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' }, 'node_down');
    expect(saw).toMatchObject({ node: 'n5' });
    expect(write(sim, 'q-0', 'drop-learner', { node: 'n5' }).ok).toBe(true);
  });

  it('refuses remove-leaving while the joined replica is down even though it covered B, and removes once it is back', () => {
    const sim = withAdmittedLearner();
    expect(write(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' }).ok).toBe(true);
    sim.advance(300);
    const p = sim.partition('q-0');
    expect(p.replicas.n5!.durable).toBeGreaterThanOrEqual(p.boundary!.offset);
    sim.fault({ fault: 'crash-node', node: 'n5' });
    expect(refused(sim, 'q-0', 'remove-leaving', { node: 'n3' }, 'node_down')).toMatchObject({ node: 'n5' });
    sim.fault({ fault: 'restart-node', node: 'n5' });
    untilAdmitted(sim, 'q-0', 'n5');
    expect(write(sim, 'q-0', 'remove-leaving', { node: 'n3' }).ok).toBe(true);
    sim.advance(1_000);
    expect(sim.invariants().breaches).toEqual([]);
  });
});

describe('nothing changes who counts while admission is closed (issue 7, rule 3)', () => {
  it('refuses every write but commit-owner and reopen-admission with admission_closed, changing nothing', () => {
    const sim = withAdmittedLearner();
    expect(write(sim, 'q-0', 'drop-learner', { node: 'n5' }).ok).toBe(true);
    const fb = write(sim, 'q-0', 'close-admission', {});
    if (!fb.ok) throw new Error(fb.refusal.message);
    const closed = { admission: 'closed', finalBoundary: fb.boundary };
    expect(refused(sim, 'q-0', 'add-learner', { node: 'n5' }, 'admission_closed')).toEqual(closed);
    refused(sim, 'q-0', 'drop-learner', { node: 'n5' }, 'admission_closed');
    refused(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' }, 'admission_closed');
    refused(sim, 'q-0', 'remove-leaving', { node: 'n3' }, 'admission_closed');
    refused(sim, 'q-0', 'promote-learner', { node: 'n5' }, 'admission_closed');
    refused(sim, 'q-0', 'close-admission', {}, 'admission_closed');
    sim.advance(300);
    const commit = write(sim, 'q-0', 'commit-owner', { newOwner: 'n2', certificate: { finalBoundary: fb.boundary!, epoch: 1 } });
    expect(commit.ok).toBe(true);
    expect(write(sim, 'q-0', 'reopen-admission', {}).ok).toBe(true);
    expect(write(sim, 'q-0', 'add-learner', { node: 'n5' }).ok).toBe(true);
  });

  it('admits no rejoining replica to the history while admission is closed, and admits it after reopening', () => {
    const sim = makeSim();
    expect(write(sim, 'q-0', 'close-admission', {}).ok).toBe(true);
    sim.fault({ fault: 'restart-node', node: 'n3' });
    const before = sim.partition('q-0').history.map((h) => ({ ...h }));
    sim.advance(3_000);
    expect(sim.partition('q-0').history).toEqual(before);
    expect(write(sim, 'q-0', 'reopen-admission', {}).ok).toBe(true);
    untilAdmitted(sim, 'q-0', 'n3');
    expect(sim.invariants().breaches).toEqual([]);
  });
});

describe('promote-learner', () => {
  it('makes the learner a follower and raises the replication factor and W in the same write', () => {
    const sim = withAdmittedLearner();
    const r = write(sim, 'q-0', 'promote-learner', { node: 'n5' });
    expect(r.ok && r.partition).toMatchObject({ followers: ['n2', 'n3', 'n5'], learners: [], replicationFactor: 4, writeRequirement: 3 });
    sim.advance(1_000);
    expect(sim.invariants().breaches).toEqual([]);
  });

  it('refuses non-learners, unadmitted learners and learners behind the confirmed tail', () => {
    const sim = makeSim();
    refused(sim, 'q-0', 'promote-learner', { node: 'n2' }, 'not_a_learner');
    write(sim, 'q-0', 'add-learner', { node: 'n5' });
    refused(sim, 'q-0', 'promote-learner', { node: 'n5' }, 'not_admitted');
    untilAdmitted(sim, 'q-0', 'n5');
    sim.fault({ fault: 'stall-transfer', partition: 'q-0', node: 'n5', stalled: true });
    sim.publish('q-0', 5);
    sim.advance(200);
    refused(sim, 'q-0', 'promote-learner', { node: 'n5' }, 'not_caught_up');
  });

  it('refuses a learner whose node is down, even admitted and caught up: W must not rise for a copy that cannot count', () => {
    const sim = withAdmittedLearner();
    sim.fault({ fault: 'crash-node', node: 'n5' });
    expect(refused(sim, 'q-0', 'promote-learner', { node: 'n5' }, 'node_down')).toEqual({ node: 'n5', live: false });
    sim.mutants.add('promote-learner.learner-live');
    expect(write(sim, 'q-0', 'promote-learner', { node: 'n5' }).ok).toBe(true);
  });

  it('refuses to raise the replication factor past 16 with its own code: nothing is in flight', () => {
    const sim = withAdmittedLearner();
    sim.partition('q-0').replicationFactor = 16;
    expect(refused(sim, 'q-0', 'promote-learner', { node: 'n5' }, 'above_maximum')).toEqual({ replicationFactor: 16 });
  });
});

describe('owner handoff', () => {
  it('closes admission at a final boundary, commits the new owner at epoch + 1 and reopens', () => {
    const sim = makeSim();
    const close = write(sim, 'q-0', 'close-admission', {});
    if (!close.ok) throw new Error(close.refusal.message);
    const fb = close.boundary!;
    expect(fb).toBe(sim.progress('q-0').tail);
    expect(events(sim)).toContain('admission_closed');
    sim.publish('q-0', 50);
    sim.advance(500);
    expect(sim.progress('q-0').tail).toBe(fb);
    const commit = write(sim, 'q-0', 'commit-owner', { newOwner: 'n2', certificate: { finalBoundary: fb, epoch: 1 } });
    expect(commit.ok && commit.partition).toMatchObject({ owner: 'n2', followers: ['n1', 'n3'], epoch: 2, admission: 'closed' });
    const reopen = write(sim, 'q-0', 'reopen-admission', {});
    expect(reopen.ok && reopen.partition.admission).toBe('open');
    expect(events(sim)).toContain('admission_reopened');
    sim.advance(500);
    expect(sim.progress('q-0').tail).toBeGreaterThanOrEqual(fb + 50);
    expect(sim.invariants().breaches).toEqual([]);
  });

  it('close-admission refuses when already closed or with a move in flight', () => {
    const sim = makeSim();
    write(sim, 'q-0', 'add-learner', { node: 'n5' });
    refused(sim, 'q-0', 'close-admission', {}, 'change_in_flight');
    write(sim, 'q-0', 'drop-learner', { node: 'n5' });
    write(sim, 'q-0', 'close-admission', {});
    refused(sim, 'q-0', 'close-admission', {}, 'admission_closed');
  });

  it('commit-owner refuses open admission, a wrong certificate, non-followers, down or lagging copies', () => {
    const sim = makeSim();
    const cert = { finalBoundary: 0, epoch: 1 };
    refused(sim, 'q-0', 'commit-owner', { newOwner: 'n2', certificate: cert }, 'admission_open');
    sim.fault({ fault: 'stall-transfer', partition: 'q-0', node: 'n3', stalled: true });
    sim.publish('q-0', 10);
    const close = write(sim, 'q-0', 'close-admission', {});
    const fb = close.ok ? close.boundary! : -1;
    sim.advance(300);
    refused(sim, 'q-0', 'commit-owner', { newOwner: 'n2', certificate: { finalBoundary: fb + 1, epoch: 1 } }, 'certificate_mismatch');
    refused(sim, 'q-0', 'commit-owner', { newOwner: 'n2', certificate: { finalBoundary: fb, epoch: 2 } }, 'certificate_mismatch');
    refused(sim, 'q-0', 'commit-owner', { newOwner: 'n5', certificate: { finalBoundary: fb, epoch: 1 } }, 'not_a_follower');
    const saw = refused(sim, 'q-0', 'commit-owner', { newOwner: 'n2', certificate: { finalBoundary: fb, epoch: 1 } }, 'not_caught_up');
    expect(saw.lagging).toEqual([{ node: 'n3', durable: expect.any(Number) }]);
    sim.fault({ fault: 'crash-node', node: 'n2' });
    refused(sim, 'q-0', 'commit-owner', { newOwner: 'n2', certificate: { finalBoundary: fb, epoch: 1 } }, 'node_down');
  });

  it('reopen-admission refuses when admission is open', () => {
    refused(makeSim(), 'q-0', 'reopen-admission', {}, 'admission_open');
  });
});

describe("the swap back: T lost after the swap, R counts again and T goes once R covers B'", () => {
  /**
   * q-0 past the swap of n5 for n3, with n5 and the owner confirming messages that neither follower holds
   * (n2 and n3 stalled a few messages behind, within the slack), and then n5 down.
   */
  function lostAfterSwap(): ClusterSim {
    const sim = withAdmittedLearner();
    expect(write(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' }).ok).toBe(true);
    sim.advance(300);
    for (const node of ['n2', 'n3']) sim.fault({ fault: 'stall-transfer', partition: 'q-0', node, stalled: true });
    sim.publish('q-0', 10);
    sim.advance(200);
    sim.fault({ fault: 'crash-node', node: 'n5' });
    return sim;
  }

  it("refuses a pair that is not T in R's place, then swaps back at B' and removes T only once R covers it", () => {
    const sim = lostAfterSwap();
    refused(sim, 'q-0', 'swap', { learner: 'n3', leaving: 'n2' }, 'not_a_follower');
    const back = write(sim, 'q-0', 'swap', { learner: 'n3', leaving: 'n5' });
    if (!back.ok) throw new Error(back.refusal.message);
    const p = sim.partition('q-0');
    expect(back.boundary).toBe(p.confirmedTail);
    expect(back.partition).toMatchObject({ followers: ['n2', 'n3'], leaving: 'n5', boundary: { joined: 'n3', leaving: 'n5', swappedBack: true } });
    expect(p.replicas['n3']!.durable).toBeLessThan(back.boundary!);
    expect(refused(sim, 'q-0', 'remove-leaving', { node: 'n5' }, 'boundary_not_covered')).toMatchObject({ joined: 'n3' });
    for (const node of ['n2', 'n3']) sim.fault({ fault: 'stall-transfer', partition: 'q-0', node, stalled: false });
    sim.advance(300);
    const removed = write(sim, 'q-0', 'remove-leaving', { node: 'n5' });
    if (!removed.ok) throw new Error(removed.refusal.message);
    expect(removed.partition).toMatchObject({ leaving: null, boundary: null, followers: ['n2', 'n3'] });
    expect(sim.invariants().breaches).toEqual([]);
  });

  it("refuses the swap back with R down; without the rule \"R covers B'\" removing T loses a confirmed message", () => {
    const down = lostAfterSwap();
    down.fault({ fault: 'crash-node', node: 'n3' });
    refused(down, 'q-0', 'swap', { learner: 'n3', leaving: 'n5' }, 'node_down');
    const sim = lostAfterSwap();
    sim.mutants.add('remove-leaving.swap-back-covered');
    expect(write(sim, 'q-0', 'swap', { learner: 'n3', leaving: 'n5' }).ok).toBe(true);
    expect(write(sim, 'q-0', 'remove-leaving', { node: 'n5' }).ok).toBe(true);
    expect(sim.invariants().breaches.map((b) => b.invariant)).toContain(1);
  });
});
