/**
 * A plan settles (planner/plan.ts): rounds planned again on what it leaves, as the loop plans once its cooldowns end,
 * and its steps netted (planner/net.ts), so a copy the loop would move on goes straight where it ends and no replica
 * moves twice or back. The net steps must still be carried out in order: each moves a copy its source holds to a
 * node that holds none, and hands a role from the owner to a follower.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { planToConvergence } from '../../planner';
import { movesOnce, netSteps } from '../../planner/net';
import type { Proposal } from '../../planner/types';
import { clusterArb } from './planner-rounds';
import { carriedOut, input } from './planner-topology';

const f = (partition: string, from: string, to: string, bytes = 10): Proposal => ({ op: 'follower_move', partition, from, to, bytes, reason: `${from} sheds` });
const h = (partition: string, from: string, to: string): Proposal => ({ op: 'owner_handoff', partition, from, to, bytes: 0, reason: `${from} hands` });
const short = (steps: Proposal[]): string[] => steps.map((s) => `${s.op === 'owner_handoff' ? 'h' : s.op === 'follower_move' ? 'f' : 'r'} ${s.partition} ${s.from}>${s.to}`);

describe('net steps', () => {
  it('a copy sent on from where it arrived goes straight there, in the later step’s place', () => {
    const net = netSteps([f('q', 'a', 'b'), f('x', 'c', 'd'), f('q', 'b', 'e', 7)]);
    expect(short(net)).toEqual(['f x c>d', 'f q a>e']);
    expect(net[1]!.bytes).toBe(7);
    expect(net[1]!.reason).toContain('straight from a: the plan first sent it to b');
  });

  it('a copy sent back where it came from, or a role handed back, cancels out', () => {
    expect(netSteps([f('q', 'a', 'b'), f('q', 'b', 'a')])).toEqual([]);
    expect(netSteps([h('q', 'a', 'b'), h('q', 'b', 'a')])).toEqual([]);
  });

  it('a copy sent to where an earlier copy of its partition left stands in for that copy', () => {
    expect(short(netSteps([f('q', 'a', 'b'), f('q', 'c', 'a')]))).toEqual(['f q c>b']);
  });

  it('a role handed on goes straight to its last owner', () => {
    expect(short(netSteps([h('q', 'a', 'b'), h('q', 'b', 'c')]))).toEqual(['h q a>c']);
  });

  it('a joined step joins an earlier one in turn', () => {
    // e sends on the copy that arrived from d (d>a), which stands in for the one a sent to b (d>b).
    expect(short(netSteps([f('q', 'a', 'b'), f('q', 'd', 'e'), f('q', 'e', 'a')]))).toEqual(['f q d>b']);
  });

  it('keeps both steps when a step between them names a node whose copy the join would move in time', () => {
    // b owns q between the two moves: b must hold its copy then.
    expect(short(netSteps([f('q', 'a', 'b'), h('q', 'o', 'b'), f('q', 'c', 'a')]))).toEqual(['f q a>b', 'h q o>b', 'f q c>a']);
    // A handoff between that names neither copy's holder changes nothing the join needs.
    expect(short(netSteps([f('q', 'a', 'b'), h('q', 'c', 'o'), f('q', 'c', 'a')]))).toEqual(['h q c>o', 'f q c>b']);
  });

  it('joins only steps of one partition, and a replacement sent on stays a replacement', () => {
    expect(short(netSteps([f('q', 'a', 'b'), f('x', 'b', 'c')]))).toEqual(['f q a>b', 'f x b>c']);
    const replaced: Proposal = { op: 'follower_replace', partition: 'q', from: 'lost', to: 'b', bytes: 10, reason: 'lost' };
    expect(short(netSteps([replaced, f('q', 'b', 'c')]))).toEqual(['r q lost>c']);
  });

  it('movesOnce finds a copy moved twice, one moved back, and a role handed back', () => {
    expect(movesOnce([f('q', 'a', 'b'), f('x', 'b', 'c')])).toBe(true);
    expect(movesOnce([f('q', 'a', 'b'), f('q', 'b', 'c')])).toBe(false);
    expect(movesOnce([f('q', 'a', 'b'), f('q', 'c', 'a')])).toBe(false);
    expect(movesOnce([h('q', 'a', 'b'), h('q', 'b', 'a')])).toBe(false);
  });
});

describe('settled plans', () => {
  const cases = fc.sample(clusterArb, { seed: 18, numRuns: 400 });

  it('are carried out step by step in order, and move no replica twice or back', () => {
    for (const c of cases) {
      const { steps } = planToConvergence(input(c.t), c.config);
      expect(carriedOut(c.t, steps)).toBe(true);
      expect(movesOnce(steps)).toBe(true);
    }
  });
});

describe('settling rounds', () => {
  it('are what leaves nearly every plan a fixed point: without them (net steps taken as they come), far fewer are', async () => {
    vi.resetModules();
    vi.doMock('../../planner/net', async (original) => ({ ...(await original<typeof import('../../planner/net')>()), netSteps: (s: Proposal[]) => [...s] }));
    try {
      const { clusterArb: arb, rounds } = await import('./planner-rounds');
      const counts = fc.sample(arb, { seed: 18, numRuns: 400 }).map(rounds);
      expect(counts.filter((r) => r !== null && r <= 1).length).toBeLessThan(0.9 * counts.length);
    } finally {
      vi.doUnmock('../../planner/net');
      vi.resetModules();
    }
  });
});
