/**
 * The partition cooldown as the note means it: within it no plan moves a copy back onto the node it left or off
 * the node it arrived on, nor hands ownership back; handing ownership to the node that just received the copy
 * (the second half of the same rebalance) is proposed at once. Each property has a mutant test beside it.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Topology } from '../../cluster/contract';
import { DEFAULT_PLANNER_CONFIG, planNow, planToConvergence, type PlanInput, type Proposal } from '../../planner';
import { TickPlanner } from '../../planner/tick';
import type { CooledMove } from '../../planner/types';
import { applySteps, input, ring, type LoadedPartition } from './planner-topology';

const config = { ...DEFAULT_PLANNER_CONFIG, maxTransfersPerNode: 2, maxTransfersPerCluster: 8 };
const FOREVER = 1e15;

afterEach(() => {
  vi.restoreAllMocks();
});

/** The topology after `steps`, every copy admitted and caught up. */
function after(t: Topology, steps: Proposal[]): Topology {
  const holders = applySteps(t, steps);
  return {
    ...t,
    partitions: t.partitions.map((p) => {
      const [owner, ...followers] = holders.get(p.id)!;
      const history = [owner!, ...followers].map((n) => ({ node: n, processId: `${n}-p1`, storageInstance: `${n}-s1`, suspended: false }));
      return { ...p, owner: owner!, followers, history };
    }),
  };
}

/** A random join: a ring of loaded nodes, some empty ones, uneven rates and sizes. */
const joins = fc.record({ loaded: fc.integer({ min: 3, max: 6 }), empty: fc.integer({ min: 1, max: 3 }), perNode: fc.integer({ min: 3, max: 8 }), seed: fc.nat(1000) }).map(({ loaded, empty, perNode, seed }) => {
  const t = ring(loaded, empty, perNode);
  t.partitions.forEach((p, i) => {
    const q = p as LoadedPartition;
    q.historyBytes = 500_000 + ((i * 7919 + seed) % 97) * 10_000;
    q.publishRate = 5 + ((i * 31 + seed) % 23);
  });
  return t;
});

/**
 * A case whose cooldowns forbid steps the planner wants: each chosen step of the plan without cooldowns, taken as
 * a move that just went the other way (so the step would take the copy or the owner role off the node it arrived
 * on and back onto the node it left).
 */
const cases = joins.chain((t) => {
  const wanted = planToConvergence(input(t), config).steps;
  return fc.subarray(wanted.map((_, i) => i), { minLength: Math.min(1, wanted.length) }).map((chosen) => {
    const moves: Record<string, CooledMove[]> = {};
    for (const i of chosen) {
      const s = wanted[i]!;
      (moves[s.partition] ??= []).push({ from: s.to, to: s.from, until: FOREVER });
    }
    return { t, moves };
  });
});

/** The first step of the plan that breaks a partition cooldown, or null. */
function breaks(c: { t: Topology; moves: Record<string, CooledMove[]> }, op: Proposal['op']): Proposal | null {
  const plan = planToConvergence(input(c.t, { cooldowns: { nodes: {}, partitions: {}, moves: c.moves } }), config);
  for (const s of plan.steps) {
    if (s.op !== op) continue;
    for (const m of c.moves[s.partition] ?? []) if (s.to === m.from || s.from === m.to) return s;
  }
  return null;
}

const fails = (op: Proposal['op']) => fc.check(fc.property(cases, (c) => breaks(c, op) === null), { numRuns: 60, seed: 3, endOnFailure: true }).failed;

describe('planner: partition cooldowns', () => {
  it('no follower move takes a cooled copy back onto the node it left or off the node it arrived on', () => {
    fc.assert(fc.property(cases, (c) => breaks(c, 'follower_move') === null), { numRuns: 60, seed: 3 });
  });

  it('no handoff hands ownership back within the cooldown', () => {
    fc.assert(fc.property(cases, (c) => breaks(c, 'owner_handoff') === null), { numRuns: 60, seed: 3 });
  });

  it('both fail with the cooldown rule removed', () => {
    vi.spyOn(TickPlanner.prototype, 'stepCooldown').mockReturnValue(null);
    expect(fails('follower_move')).toBe(true);
    expect(fails('owner_handoff')).toBe(true);
  });

  /** n4 joined and received its follower copies: those moves' cooldowns run, and n4 is cooling as a receiver. */
  function joined(): { t: Topology; cooled: PlanInput } {
    const t = ring(4, 1, 10);
    const followerMoves = planToConvergence(input(t), config).steps.filter((s) => s.op === 'follower_move');
    expect(followerMoves.length).toBeGreaterThan(0);
    const moves: Record<string, CooledMove[]> = {};
    for (const s of followerMoves) (moves[s.partition] ??= []).push({ from: s.from, to: s.to, until: 300_000 });
    const now = after(t, followerMoves);
    return { t: now, cooled: input(now, { cooldowns: { nodes: { n4: 60_000 }, partitions: {}, moves }, now: 1_000 }) };
  }

  it('hands ownership to the node that just received the copy at once: the second half of the same rebalance', () => {
    const { cooled } = joined();
    const plan = planNow(cooled, config);
    const handoffs = plan.steps.filter((s) => s.op === 'owner_handoff');
    expect(handoffs.length).toBeGreaterThan(0);
    for (const h of handoffs) {
      expect(h.to).toBe('n4');
      expect(cooled.cooldowns.moves![h.partition]).toBeDefined();
    }
  });

  it('fails when the cooldown also holds the handoff to the node the copy arrived on', () => {
    const real = TickPlanner.prototype.stepCooldown;
    vi.spyOn(TickPlanner.prototype, 'stepCooldown').mockImplementation(function (this: TickPlanner, p, from, to) {
      return real.call(this, p, from, to) ?? real.call(this, p, to, from);
    });
    const { cooled } = joined();
    expect(planNow(cooled, config).steps.filter((s) => s.op === 'owner_handoff')).toEqual([]);
  });

  it('names the cooldown that holds a step, and until when', () => {
    const t = ring(4, 1, 10);
    // Every copy on n4's future sources just arrived there: nothing may leave them, n4 stays below the band.
    const moves: Record<string, CooledMove[]> = {};
    for (const p of t.partitions) moves[p.id] = [p.owner, ...p.followers].map((n) => ({ from: null, to: n, until: 300_000 }));
    const plan = planNow(input(t, { cooldowns: { nodes: {}, partitions: {}, moves }, now: 1_000 }), config);
    expect(plan.steps).toEqual([]);
    expect(plan.idleReason).toMatch(/no follower move can start: q-\d+ stays on n\d, where it just arrived, until 1970-01-01T00:05:00.000Z \(partition cooldown\)/);
  });

  it('a drain moves a copy off the node it just arrived on: an operator\'s drain is intent', () => {
    const t = ring(4, 1, 10);
    const onN1 = t.partitions.filter((p) => p.followers.includes('n1')).map((p) => p.id);
    const moves = Object.fromEntries(onN1.map((id) => [id, [{ from: 'n0', to: 'n1', until: 300_000 }]]));
    const plan = planToConvergence(input(t, { cooldowns: { nodes: {}, partitions: {}, moves }, now: 1_000, draining: ['n1'] }), config);
    const off = new Set(plan.steps.filter((s) => s.from === 'n1' && s.op === 'follower_move').map((s) => s.partition));
    expect(onN1.filter((id) => !off.has(id))).toEqual([]);
  });
});
