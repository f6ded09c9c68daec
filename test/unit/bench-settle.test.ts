/**
 * The settle benchmark's pure parts (bench/settle-rules.ts): when a cluster counts as settled, and the transfer
 * bound it is judged against. A settled predicate that is too lenient, or a bound that is too large, would make the
 * benchmark flatter the product.
 */
import { describe, expect, it } from 'vitest';
import type { Topology } from '../../cluster/contract';
import { DEFAULT_PLANNER_CONFIG, planToConvergence, scoreNodes, zoneBoundNodes } from '../../planner';
import { activityOf, busiestReceiver, repairSteps, targetMs, transferBoundMs, unsettledReasons, withoutCooldowns } from '../../bench/settle-rules';
import { afterSteps, input, node, partition, ring, topology } from './planner-topology';

const cfg = DEFAULT_PLANNER_CONFIG;
const MiB = 2 ** 20;

function reasons(t: Topology, running = 0, draining: string[] = []): string[] {
  return unsettledReasons(t, scoreNodes(input(t, { draining }), cfg), cfg.threshold, running);
}

/** ring(5, 0, 3) with one partition changed. */
function balancedWith(change: (t: Topology) => void): Topology {
  const t = ring(5, 0, 3);
  change(t);
  return t;
}

describe('settled', () => {
  it('holds for a balanced cluster at rest', () => {
    expect(reasons(ring(5, 0, 3))).toEqual([]);
  });

  it('fails while anything is in flight: a learner, a leaving copy, a closed admission, a recovery, a running reconfiguration', () => {
    expect(reasons(balancedWith((t) => t.partitions[0]!.learners.push('n3')))).toEqual(['q-0: learner on n3']);
    expect(reasons(balancedWith((t) => (t.partitions[0]!.leaving = 'n3')))).toEqual(['q-0: n3 leaving']);
    expect(reasons(balancedWith((t) => (t.partitions[0]!.admission = 'closed')))[0]).toMatch(/^q-0: a reconfiguration holds admission/);
    expect(reasons(balancedWith((t) => (t.partitions[0]!.pendingRecovery = { openedAt: 0, reason: 'owner failed' } as never)))).toEqual(['q-0: pending recovery']);
    expect(reasons(ring(5, 0, 3), 1)).toEqual(['1 reconfiguration(s) running']);
  });

  it('fails while a live node is outside the band, and names it', () => {
    const why = reasons(ring(5, 1, 3));
    expect(why[0]).toMatch(/^n5 is -1\.\d+ off the mean/);
  });

  it('excuses a node above the band only where it is named held there by the zone rule', () => {
    // n3 is z3's only node and holds a copy of every partition: its share is all of them, so the planner names no
    // node held above the band, and n3 counts like any other (it owns nothing, so it is below the band).
    const zoned = [node('n1', { zone: 'z1' }), node('n2', { zone: 'z2' }), node('n3', { zone: 'z3' }), node('n4', { zone: 'z1' }), node('n5', { zone: 'z2' })];
    const t = topology(zoned, Array.from({ length: 10 }, (_, i) => partition(`q-${i}`, ['n1', 'n4'][i % 2]!, [['n2', 'n5'][(i >> 1) % 2]!, 'n3'])));
    expect(zoneBoundNodes(input(t), cfg)).toEqual([]);
    const scores = scoreNodes(input(t), cfg);
    const all = unsettledReasons(t, scores, cfg.threshold, 0);
    expect(all.filter((w) => /^n1 is 0\.\d+ off the mean/.test(w))).toHaveLength(1);
    expect(unsettledReasons(t, scores, cfg.threshold, 0, new Set(['n1']))).toEqual(all.filter((w) => !w.startsWith('n1 ')));
    // Only above the band: a bound node below it, or a node outside it that is not bound, still counts.
    expect(unsettledReasons(t, scores, cfg.threshold, 0, new Set(['n3'])).some((w) => /^n3 is -0\.\d+ off the mean/.test(w))).toBe(true);
    expect(unsettledReasons(ring(5, 1, 3), scoreNodes(input(ring(5, 1, 3)), cfg), cfg.threshold, 0, new Set(['n5']))[0]).toMatch(/^n5 is -1\.\d+ off the mean/);
    // What the plan leaves is settled with nothing excused.
    const left = afterSteps(t, planToConvergence(input(t), cfg).steps);
    expect(unsettledReasons(left, scoreNodes(input(left), cfg), cfg.threshold, 0)).toEqual([]);
  });

  it('fails while a copy sits on a node that is down or draining, not for a down or drained node that holds nothing', () => {
    const lost = balancedWith((t) => (t.nodes[4]!.live = false));
    expect(reasons(lost).some((w) => w.includes('copy on n4, which is down'))).toBe(true);
    const draining = ring(5, 0, 3);
    expect(reasons(draining, 0, ['n4']).some((w) => w.includes('copy on n4, which is draining'))).toBe(true);
    // An empty node that is down does not count toward the band (it is not live).
    const t = ring(5, 1, 3);
    t.nodes[5]!.live = false;
    expect(reasons(t)).toEqual([]);
  });
});

describe('the transfer bound', () => {
  it('is the busiest receiver over the sync rate; handoffs copy nothing', () => {
    const steps = [
      { op: 'follower_move' as const, to: 'a', bytes: 10 * MiB },
      { op: 'follower_move' as const, to: 'a', bytes: 6 * MiB },
      { op: 'follower_move' as const, to: 'b', bytes: 12 * MiB },
      { op: 'owner_handoff' as const, to: 'c', bytes: 100 * MiB },
    ];
    expect(busiestReceiver(steps)).toEqual({ node: 'a', bytes: 16 * MiB });
    expect(transferBoundMs(steps, 4 * MiB)).toBe(4000);
    expect(transferBoundMs([], 4 * MiB)).toBe(0);
  });

  it('of a join is the newcomer receiving its share, from the planner plan without cooldowns', () => {
    const t = ring(5, 1, 3, 3, { historyBytes: 30 * MiB });
    const plan = planToConvergence(input(t), withoutCooldowns(cfg)).steps;
    const b = busiestReceiver(plan);
    const onto = plan.filter((s) => s.op === 'follower_move');
    expect(onto.every((s) => s.to === 'n5')).toBe(true);
    expect(b).toEqual({ node: 'n5', bytes: onto.reduce((a, s) => a + s.bytes, 0) });
    expect(transferBoundMs(plan, cfg.syncBytesPerSec)).toBe((1000 * b.bytes) / cfg.syncBytesPerSec);
  });

  it('of a loss spreads the lost copies over nodes that lack them, a missing zone first', () => {
    const t = topology(
      [node('a', { zone: 'z1' }), node('b', { zone: 'z2' }), node('c', { zone: 'z3' }), node('d', { zone: 'z3' }), node('e', { zone: 'z1' })],
      [partition('q-0', 'a', ['b', 'c']), partition('q-1', 'c', ['a', 'b']), partition('q-2', 'b', ['c', 'd'], { historyBytes: 3_000_000 })],
    );
    t.nodes[2]!.live = false;
    const steps = repairSteps(t, 'c');
    expect(steps.map((s) => [s.partition, s.to])).toEqual([
      ['q-2', 'a'],
      ['q-0', 'd'],
      ['q-1', 'd'],
    ]);
    expect(busiestReceiver(steps)).toEqual({ node: 'a', bytes: 3_000_000 });
  });
});

describe('what a sample waits on', () => {
  it('tells moving, the sync budget, a tick, a cooldown and a block apart', () => {
    const s = { inFlight: 0, proposedNow: 0, proposedUnlimited: 0, proposedWithoutCooldowns: 0 };
    expect(activityOf({ ...s, inFlight: 2, proposedNow: 0, proposedUnlimited: 0 })).toBe('moving');
    expect(activityOf({ ...s, inFlight: 2, proposedNow: 0, proposedUnlimited: 1 })).toBe('syncBudget');
    expect(activityOf({ ...s, proposedNow: 1, proposedUnlimited: 1, proposedWithoutCooldowns: 1 })).toBe('tick');
    expect(activityOf({ ...s, proposedWithoutCooldowns: 2 })).toBe('cooldown');
    expect(activityOf(s)).toBe('blocked');
  });

  it('targets 1.5 times the transfer bound plus one tick', () => {
    expect(targetMs(63_000, 10_000)).toBe(104_500);
  });
});
