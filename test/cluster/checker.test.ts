/**
 * The safety checker must be able to fail: a weakened precondition (remove-leaving without the boundary
 * check, a test-only mutant) and faults beyond the budget both have to show up as breaches, while recovery
 * within the budget keeps every confirmed message even though it seals the least up-to-date replicas.
 */
import { describe, expect, it } from 'vitest';
import { MUTANTS } from '../../cluster/sim/mutants';
import { ClusterSim } from '../../cluster/sim/sim';
import { makeSim, untilAdmitted, write } from './helpers';

describe('the invariant checker', () => {
  /** n2 is down while messages are confirmed on n1 + n3; the learner n5 is stalled a little behind. */
  function boundaryAboveJoined(skipBoundaryCheck: boolean) {
    const sim = makeSim();
    if (skipBoundaryCheck) sim.mutants.add('remove-leaving.boundary-covered');
    expect(write(sim, 'q-0', 'add-learner', { node: 'n5' }).ok).toBe(true);
    untilAdmitted(sim, 'q-0', 'n5');
    sim.fault({ fault: 'crash-node', node: 'n2' });
    sim.fault({ fault: 'stall-transfer', partition: 'q-0', node: 'n5', stalled: true });
    sim.publish('q-0', 15);
    sim.advance(300);
    const swap = write(sim, 'q-0', 'swap', { learner: 'n5', leaving: 'n3' });
    if (!swap.ok) throw new Error(swap.refusal.message);
    return { sim, boundary: swap.boundary! };
  }

  it('catches the loss when remove-leaving skips the boundary check (a test-only mutant)', () => {
    const { sim, boundary } = boundaryAboveJoined(true);
    const joined = sim.progress('q-0').replicas.find((r) => r.node === 'n5')!.durableOffset;
    expect(joined).toBeLessThan(boundary);
    expect(write(sim, 'q-0', 'remove-leaving', { node: 'n3' }).ok).toBe(true);
    // Invariant 4 is the removal's self-report from the branch the mutant opened; the evidence that counts
    // is the independent checker's.
    const independent = sim.invariants().breaches.filter((b) => b.invariant !== 4);
    expect(independent.map((b) => b.invariant)).toEqual([1]);
    const loss = independent[0]!;
    expect(loss).toMatchObject({ partition: 'q-0', offset: boundary - 1 });
    expect(loss.detail).toMatch(/held by 1 eligible replica\(s\) \[n1\]/);
    expect(loss.state).toMatchObject({ owner: 'n1', followers: ['n2', 'n5'], confirmedTail: boundary });
  });

  it('keeps mutants in memory only: never in a snapshot or a restored simulation', () => {
    const { sim } = boundaryAboveJoined(true);
    const snap = sim.snapshot();
    expect(JSON.stringify(snap)).not.toContain('boundary-covered');
    const restored = ClusterSim.fromSnapshot(structuredClone(snap));
    expect(restored.mutants.size).toBe(0);
    const r = write(restored, 'q-0', 'remove-leaving', { node: 'n3' });
    expect(!r.ok && r.refusal.code).toBe('boundary_not_covered');
  });

  it('gives every mutant that cannot make the cluster unsafe its written reason', () => {
    const unexplained = Object.entries(MUTANTS).filter(([, m]) => !m.safety && !('why' in m && m.why));
    expect(unexplained.map(([name]) => name)).toEqual([]);
  });

  it('records nothing when the same steps run with the boundary check on', () => {
    const { sim } = boundaryAboveJoined(false);
    const r = write(sim, 'q-0', 'remove-leaving', { node: 'n3' });
    expect(!r.ok && r.refusal.code).toBe('boundary_not_covered');
    sim.fault({ fault: 'stall-transfer', partition: 'q-0', node: 'n5', stalled: false });
    sim.advance(300);
    expect(write(sim, 'q-0', 'remove-leaving', { node: 'n3' }).ok).toBe(true);
    expect(sim.invariants().breaches).toEqual([]);
  });

  it('reports a loss beyond the fault budget (W lost disks holding a confirmed message)', () => {
    const sim = makeSim();
    sim.fault({ fault: 'crash-node', node: 'n3' });
    sim.publish('q-0', 100);
    sim.advance(300);
    const confirmed = sim.progress('q-0').confirmedTail;
    sim.fault({ fault: 'lose-disk', node: 'n1' });
    expect(sim.invariants().breaches).toEqual([]);
    sim.fault({ fault: 'lose-disk', node: 'n2' });
    const lost = sim.invariants().breaches.find((b) => b.partition === 'q-0');
    expect(lost).toMatchObject({ invariant: 2, offset: confirmed - 1 });
    expect(lost!.detail).toMatch(/lost/);
  });

  it('recovers every confirmed message within the budget although it seals the least up-to-date replicas', () => {
    const sim = makeSim();
    sim.fault({ fault: 'crash-node', node: 'n3' });
    sim.publish('q-0', 100);
    sim.advance(300);
    const confirmed = sim.progress('q-0').confirmedTail;
    sim.fault({ fault: 'crash-node', node: 'n1' });
    sim.advance(2_000);
    // Only n2 survives: E - W + 1 = 2 seals are needed, so the recovery waits.
    expect(sim.partition('q-0').pendingRecovery).not.toBeNull();
    sim.fault({ fault: 'restart-node', node: 'n3' });
    sim.advance(200);
    const p = sim.partition('q-0');
    expect(p).toMatchObject({ owner: 'n2', epoch: 2, pendingRecovery: null });
    expect(p.followers).toContain('n1');
    expect(sim.progress('q-0').tail).toBeGreaterThanOrEqual(confirmed);
    sim.fault({ fault: 'restart-node', node: 'n1' });
    sim.advance(2_000);
    expect(sim.partition('q-0').history.every((h) => !h.suspended)).toBe(true);
    expect(sim.invariants().breaches).toEqual([]);
  });

  it('re-admits a replica that lost its disk only once it holds every confirmed message (W = E seals one)', () => {
    // Found by the model test (seed 38591630): n1 rejoined within the catch-up slack but below the confirmed
    // tail, and the next recovery sealed it alone.
    const sim = makeSim({ durability: { mode: 'replica_durable', n: 3 }, transferBytesPerSec: 5_000, publishRate: 0 }, 5, 3);
    sim.fault({ fault: 'lose-disk', node: 'n1' });
    sim.advance(600);
    untilAdmitted(sim, 'q-0', 'n1', 60_000);
    const p = sim.partition('q-0');
    expect(p.owner).toBe('n2');
    expect(p.replicas.n1!.durable).toBeGreaterThanOrEqual(p.confirmedTail);
    sim.fault({ fault: 'crash-node', node: 'n2' });
    sim.advance(2_000);
    expect(sim.partition('q-0').pendingRecovery).toBeNull();
    expect(sim.invariants().breaches).toEqual([]);
  });

  it('lets at most W - 1 restarted followers rejoin at once, recovery transfers before rebalancing', () => {
    const sim = makeSim({ transferBytesPerSec: 20_000 });
    sim.fault({ fault: 'crash-node', node: 'n2' });
    sim.fault({ fault: 'crash-node', node: 'n3' });
    sim.publish('q-0', 2_000);
    sim.advance(100);
    sim.fault({ fault: 'restart-node', node: 'n2' });
    sim.fault({ fault: 'restart-node', node: 'n3' });
    sim.advance(100);
    const q0 = sim.syncBudget().transfers.filter((t) => t.partition === 'q-0');
    expect(q0).toEqual([expect.objectContaining({ kind: 'recovery' })]);
    sim.advance(30_000);
    expect(sim.partition('q-0').history.every((h) => !h.suspended)).toBe(true);
    expect(sim.invariants().breaches).toEqual([]);
  });

  it('refuses a rebalance transfer while a recovery transfer waits for the slot', () => {
    const sim = makeSim({ perNodeLimit: 1, transferBytesPerSec: 20_000 });
    // n4 rejoins q-1 (recovery) and q-2 waits behind it on the same node.
    sim.fault({ fault: 'crash-node', node: 'n4' });
    sim.publish('q-1', 2_000);
    sim.publish('q-2', 2_000);
    sim.advance(100);
    sim.fault({ fault: 'restart-node', node: 'n4' });
    sim.advance(100);
    const r = write(sim, 'q-0', 'add-learner', { node: 'n4' });
    expect(!r.ok && r.refusal.code).toBe('no_sync_budget');
    expect(!r.ok && r.refusal.saw).toMatchObject({ node: 'n4', inUse: 1, limit: 1 });
  });

  it('pauses a running rebalancing transfer so that a waiting recovery transfer gets its slot at once (issue 7, rule 4)', () => {
    // q-3: n4 owner, n5 n6 followers. n6 runs two rebalancing transfers (learner of q-0 and q-1), the
    // per-node limit, when it restarts and must rejoin q-3 (and the stream s-0, which it also follows).
    const sim = makeSim({ transferBytesPerSec: 20_000 }, 6, 4);
    expect(write(sim, 'q-0', 'add-learner', { node: 'n6' }).ok).toBe(true);
    expect(write(sim, 'q-1', 'add-learner', { node: 'n6' }).ok).toBe(true);
    sim.fault({ fault: 'crash-node', node: 'n6' });
    sim.publish('q-3', 300);
    sim.advance(100);
    sim.fault({ fault: 'restart-node', node: 'n6' });
    sim.takeChanges();
    sim.advance(200);

    const transfers = sim.syncBudget().transfers;
    expect(transfers).toContainEqual(expect.objectContaining({ partition: 'q-3', node: 'n6', kind: 'recovery', pausedForRecovery: false }));
    const paused = transfers.find((t) => t.pausedForRecovery);
    expect(paused).toMatchObject({ node: 'n6', kind: 'rebalance' });
    expect(sim.syncBudget().nodes.find((n) => n.node === 'n6')).toMatchObject({ inUse: 2, limit: 2 });
    const pausedLearner = () => sim.progress(paused!.partition).replicas.find((r) => r.node === 'n6')!;
    const learner = pausedLearner();
    expect(learner).toMatchObject({ pausedForRecovery: true, stalledSince: null });
    const reported = sim.takeChanges().events.map((e) => e.event);
    expect(reported).toContainEqual(
      expect.objectContaining({
        type: 'progress',
        partition: paused!.partition,
        replicas: expect.arrayContaining([expect.objectContaining({ node: 'n6', pausedForRecovery: true, stalled: false })]),
      }),
    );
    const heldAt = learner.durableOffset;
    sim.advance(300);
    expect(pausedLearner()).toMatchObject({ pausedForRecovery: true, durableOffset: heldAt, stalledSince: null });

    untilAdmitted(sim, 'q-3', 'n6');
    untilAdmitted(sim, 's-0', 'n6');
    sim.advance(200);
    expect(sim.syncBudget().transfers).toEqual([
      expect.objectContaining({ partition: 'q-0', node: 'n6', kind: 'rebalance', pausedForRecovery: false }),
      expect.objectContaining({ partition: 'q-1', node: 'n6', kind: 'rebalance', pausedForRecovery: false }),
    ]);
    untilAdmitted(sim, 'q-0', 'n6', 60_000);
    untilAdmitted(sim, 'q-1', 'n6', 60_000);
    expect(sim.invariants().breaches).toEqual([]);
  });

  it('gives a down node\'s transfer slots back to the budget, and takes them again through the grant path once it is up (issue 7, rule 8)', () => {
    // One slot cluster-wide: a learner on a node that never returns would otherwise block every move for good.
    // n7 holds no replica, so it has nothing to rejoin when it returns.
    const sim = makeSim({ clusterLimit: 1, transferBytesPerSec: 20_000 }, 7);
    sim.publish('q-0', 2_000);
    expect(write(sim, 'q-0', 'add-learner', { node: 'n7' }).ok).toBe(true);
    sim.advance(200);
    sim.fault({ fault: 'crash-node', node: 'n7' });
    expect(sim.syncBudget()).toMatchObject({ clusterInUse: 0, transfers: [] });
    const held = sim.progress('q-0').replicas.find((r) => r.node === 'n7')!;
    expect(held.stalledSince).not.toBeNull();
    expect(write(sim, 'q-1', 'add-learner', { node: 'n6' }).ok).toBe(true);

    // Back up, n7's learner waits paused (not stalled) while the one slot is taken.
    sim.fault({ fault: 'restart-node', node: 'n7' });
    sim.advance(100);
    expect(sim.syncBudget().transfers).toEqual([
      expect.objectContaining({ partition: 'q-0', node: 'n7', kind: 'rebalance', pausedForRecovery: true }),
      expect.objectContaining({ partition: 'q-1', node: 'n6', kind: 'rebalance', pausedForRecovery: false }),
    ]);
    expect(sim.progress('q-0').replicas.find((r) => r.node === 'n7')).toMatchObject({ pausedForRecovery: true, stalledSince: null });
    untilAdmitted(sim, 'q-1', 'n6', 60_000);
    untilAdmitted(sim, 'q-0', 'n7', 60_000);
    expect(sim.progress('q-0').replicas.find((r) => r.node === 'n7')!.durableOffset).toBeGreaterThan(held.durableOffset);

    // A rejoin's recovery slot too: n3 crashes while rejoining, and rejoins everything once it is up again.
    sim.fault({ fault: 'crash-node', node: 'n3' });
    sim.publish('q-0', 2_000);
    sim.advance(100);
    sim.fault({ fault: 'restart-node', node: 'n3' });
    sim.advance(100);
    expect(sim.syncBudget()).toMatchObject({ clusterInUse: 1, transfers: [expect.objectContaining({ node: 'n3', kind: 'recovery' })] });
    sim.fault({ fault: 'crash-node', node: 'n3' });
    expect(sim.syncBudget()).toMatchObject({ clusterInUse: 0, transfers: [] });
    sim.fault({ fault: 'restart-node', node: 'n3' });
    for (const q of ['q-0', 'q-1', 'q-2']) untilAdmitted(sim, q, 'n3', 60_000);
    expect(sim.syncBudget().clusterInUse).toBe(0);
    expect(sim.invariants().breaches).toEqual([]);
  });
});
