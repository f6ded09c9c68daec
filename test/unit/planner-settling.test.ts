/**
 * A plan settles (planner/plan.ts): rounds planned again on what it leaves, as the loop plans once its cooldowns end,
 * and its steps netted (planner/net.ts), so a copy the loop would move on goes straight where it ends and no replica
 * moves twice or back. The net steps must still be carried out in order: each moves a copy its source holds to a
 * node that holds none, and hands a role from the owner to a follower.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { planToConvergence } from '../../planner';
import { movesOnce, netSteps, throughFollower } from '../../planner/net';
import type { Proposal } from '../../planner/types';
import { clusterArb } from './planner-rounds';
import type { Topology } from '../../cluster/contract';
import { afterSteps, carriedOut, input, node, partition, topology } from './planner-topology';

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

  it("a copy standing in for one an earlier step took goes in that step's place when a step between needs its receiver's copy", () => {
    // b owns q from the handoff on, so c's copy goes to b early, in a's place; a keeps its copy.
    const net = netSteps([f('q', 'a', 'b'), f('x', 'd', 'e'), h('q', 'o', 'b'), f('q', 'c', 'a')]);
    expect(short(net)).toEqual(['f q c>b', 'f x d>e', 'h q o>b']);
    expect(net[0]!.reason).toContain('from c in place of a');
  });

  it('a role handed on goes straight to its last owner', () => {
    expect(short(netSteps([h('q', 'a', 'b'), h('q', 'b', 'c')]))).toEqual(['h q a>c']);
  });

  it('a joined step joins an earlier one in turn', () => {
    // e sends on the copy that arrived from d (d>a), which stands in for the one a sent to b (d>b).
    expect(short(netSteps([f('q', 'a', 'b'), f('q', 'd', 'e'), f('q', 'e', 'a')]))).toEqual(['f q d>b']);
  });

  it('a copy sent to the node a role goes to, then the old owner\'s copy sent back: the role goes through the first copy\'s holder', () => {
    // b owns q from the handoff on and c until then: neither copy can go at the other's time. a keeps its copy instead.
    const net = netSteps([f('q', 'a', 'b'), f('x', 'c', 'a'), h('q', 'c', 'b'), f('x', 'a', 'd'), f('q', 'c', 'a')]);
    expect(short(net)).toEqual(['h q c>a', 'f q c>b', 'h q a>b', 'f x c>d']);
    expect(net[0]!.reason).toContain('through a, which keeps its copy');
  });

  it('joins across a step between that names neither copy\'s holder', () => {
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

  it('routes a role through a follower only where no step of the partition between names a node whose copy it moves in time', () => {
    // a gets a copy back between the handoff and the later step: a must not keep its copy.
    const after = [f('q', 'a', 'b'), h('q', 'c', 'b'), f('q', 'd', 'a'), f('q', 'a', 'e'), f('q', 'c', 'a')];
    expect(short(throughFollower(after))).toEqual(short(after));
    // ... or between the first copy's move and the handoff.
    const before = [f('q', 'a', 'b'), f('q', 'd', 'a'), f('q', 'a', 'e'), h('q', 'c', 'b'), f('q', 'c', 'a')];
    expect(short(throughFollower(before))).toEqual(short(before));
  });
});

/** Two partitions (q of 4 copies, x of 3) on six nodes, and a random sequence of steps each valid where it stands. */
const sequenceArb = fc.array(fc.tuple(fc.boolean(), fc.boolean(), fc.nat(), fc.nat()), { minLength: 2, maxLength: 12 }).map((choices) => {
  const t = topology(['a', 'b', 'c', 'd', 'e', 'f'].map((id) => node(id)), [partition('q', 'a', ['b', 'c', 'e']), partition('x', 'b', ['c', 'd'])]);
  const steps: Proposal[] = [];
  for (const [inQ, hand, i, j] of choices) {
    const p = afterSteps(t, steps).partitions.find((x) => x.id === (inQ ? 'q' : 'x'))!;
    const free = t.nodes.map((n) => n.id).filter((n) => n !== p.owner && !p.followers.includes(n));
    const from = p.followers[i % p.followers.length]!;
    steps.push(hand ? h(p.id, p.owner, from) : f(p.id, from, free[j % free.length]!));
  }
  return { t, steps };
});

describe('net steps of any sequence', () => {
  const sequences = fc.sample(sequenceArb, { seed: 18, numRuns: 3000 });

  it('are carried out in order and end where the steps end; nearly all move no replica twice or back', () => {
    const placement = (t: Topology) => t.partitions.map((p) => `${p.owner}:${[...p.followers].sort().join(',')}`).join(' ');
    let once = 0;
    for (const { t, steps } of sequences) {
      const net = netSteps(steps);
      expect(carriedOut(t, net), short(steps).join('; ')).toBe(true);
      expect(placement(afterSteps(t, net))).toBe(placement(afterSteps(t, steps)));
      if (movesOnce(net)) once++;
    }
    expect(once).toBeGreaterThanOrEqual(0.99 * sequences.length);
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
