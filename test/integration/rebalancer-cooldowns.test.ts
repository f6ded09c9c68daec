/**
 * The loop with the DEFAULT cooldowns (node 1 minute, partition 5 minutes), end to end on a real dev server and
 * reference cluster: a node that joins receives its follower copies and then the owner handoffs that finish the
 * job without waiting out the partition cooldown; an operator's handoff and move set the same cooldowns as the
 * loop's own moves, so the loop does not undo them; the dry run plans with the loop's live state and its "now" is
 * what the loop starts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createRebalancerActivities } from '../../activities/rebalancer';
import { cooledMovesOf } from '../../operations/closed';
import type { DryRun } from '../../operations/dry-run';
import { rebalancerStatus, setPaused } from '../../operations/rebalancer';
import type { Topology } from '../../cluster/contract';
import { DEFAULT_PLANNER_CONFIG, planNow, scoreNodes } from '../../planner';
import type { CooledMove, PlanInput } from '../../planner/types';
import type { RebalancerSettings, RebalancerStatus } from '../../rules/definitions';
import { holders } from '../../rules/rebalancer-rules';
import { cli, eventually, logger, loopRunId, replayAndKeep, startLoopSuite, stopLoopSuite, type LoopSuite } from './helpers';

const taskQueue = `rebalancer-cooldowns-${process.pid}`;
const SETTINGS: RebalancerSettings = { planner: DEFAULT_PLANNER_CONFIG, tickMs: 1_000, ticksPerRun: 200 };

let suite: LoopSuite;

beforeAll(async () => {
  suite = await startLoopSuite(taskQueue, SETTINGS, 500);
});

afterAll(async () => {
  await stopLoopSuite(suite ?? {});
});

afterEach(async () => {
  expect((await suite.cluster.client.invariants()).breaches).toEqual([]);
});

const status = (): Promise<RebalancerStatus> => rebalancerStatus(suite.client, suite.scope);

/** The partition cooldowns the loop plans with: its worker keeps them from visibility, not in the loop's state. */
const cooledMoves = (): Promise<Record<string, CooledMove[]>> => cooledMovesOf(suite.client, taskQueue, SETTINGS.planner.partitionCooldownMs);

const noCooldowns = (topology: Topology) => ({ topology, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: Date.now() });

/** Nothing in flight, on the broker or in the loop, and the loop's last tick started nothing and waits on no move. */
async function quiet(what: string, timeoutMs: number, also: (t: Topology, s: RebalancerStatus) => boolean = () => true): Promise<{ topology: Topology; status: RebalancerStatus }> {
  return eventually(
    what,
    async () => {
      const [topology, s] = await Promise.all([suite.cluster.client.topology(), status()]);
      const busy = topology.partitions.filter((p) => p.learners.length > 0 || p.leaving || p.admission === 'closed' || p.pendingRecovery).map((p) => p.id);
      const idle = s.lastPlan?.idleReason ?? null;
      if (busy.length === 0 && s.inFlight.length === 0 && idle !== null && !/in flight/.test(idle) && also(topology, s)) return { topology, status: s };
      throw new Error(`busy ${busy.join(',') || '-'}; ${s.inFlight.length} in flight; last plan: ${idle ?? 'started moves'}`);
    },
    timeoutMs,
  );
}

const deviation = (topology: Topology): number => {
  const { mean, nodes } = scoreNodes(noCooldowns(topology), SETTINGS.planner);
  return Math.max(...nodes.map((n) => Math.abs(n.total - mean)));
};

/** Watches the loop for `ms`: every move it had in flight in that time. */
async function loopMovesFor(ms: number): Promise<RebalancerStatus['inFlight']> {
  const seen = new Map<string, RebalancerStatus['inFlight'][number]>();
  const end = Date.now() + ms;
  while (Date.now() < end) {
    for (const m of (await status()).inFlight) seen.set(m.runId, m);
    await new Promise((r) => setTimeout(r, 250));
  }
  return [...seen.values()];
}

/** A partition no cooldown holds, so only the operator's action below cools it. */
const uncooled = async (t: Topology, s: RebalancerStatus) => {
  const moves = await cooledMoves();
  return t.partitions.filter((p) => !moves[p.id] && !s.cooldowns.partitions[p.id]);
};

describe('rebalancer loop with the default cooldowns', () => {
  it('a node joins: its follower copies and then the owner handoffs onto it, without waiting out the partition cooldown', async () => {
    await quiet('the initial cluster at rest', 60_000);
    const joined = Date.now();
    await suite.cluster.client.joinNode('n4', 1, 'z1');
    const after = await quiet('every node within threshold after n4 joined', SETTINGS.planner.partitionCooldownMs, (t) => deviation(t) <= SETTINGS.planner.threshold);
    const seconds = (Date.now() - joined) / 1000;
    logger.info({ seconds, startedByOp: after.status.startedByOp }, 'settled after the join');
    expect(after.status.startedByOp?.follower_move).toBeGreaterThan(0);
    // n4 took its share of owners by handoff, each while the cooldown of the copy that had just arrived there ran.
    const owned = after.topology.partitions.filter((p) => p.owner === 'n4');
    expect(owned.length).toBeGreaterThan(0);
    expect(after.status.startedByOp?.owner_handoff).toBeGreaterThan(0);
    const cooled = await cooledMoves();
    for (const p of owned) expect(cooled[p.id]).toContainEqual({ from: expect.any(String), to: 'n4', until: expect.any(Number) });
    // The loop's state counts them and carries none.
    expect(after.status.cooling).toBeGreaterThanOrEqual(owned.length);
    expect(after.status.cooldowns.moves).toBeUndefined();
    expect(seconds * 1000).toBeLessThan(SETTINGS.planner.partitionCooldownMs / 2);
  });

  it("an operator's handoff sets the cooldowns of the loop's own: the loop does not hand ownership back", async () => {
    const before = await quiet('the cluster at rest before the handoff', 60_000);
    // Ownership onto a follower that owns its share already, so the handoff puts it above the band; a partition no
    // cooldown holds yet when there is one.
    const owns = (n: string) => before.topology.partitions.filter((x) => x.owner === n).length;
    const share = before.topology.partitions.length / before.topology.nodes.length;
    const free = new Set((await uncooled(before.topology, before.status)).map((x) => x.id));
    const pairs = before.topology.partitions.flatMap((x) => x.followers.filter((f) => owns(f) >= share).map((f) => ({ p: x, to: f, free: free.has(x.id) })));
    const { p, to } = pairs.find((x) => x.free) ?? pairs[0]!;
    const r = await cli('handoff', p.id, '--to', to, '--wait', '--reason', 'operator intent', '--json');
    expect(r.code).toBe(0);
    // Without the cooldowns the planner hands ownership off the node that took it: there is something to undo.
    const now = await suite.cluster.client.topology();
    const undo = planNow(noCooldowns(now), SETTINGS.planner);
    expect(undo.steps.some((s) => s.op === 'owner_handoff' && s.from === to), JSON.stringify(undo)).toBe(true);
    await eventually("the operator's handoff cooling its partition", async () => ((await cooledMoves())[p.id]?.some((m) => m.from === p.owner && m.to === to) ? true : undefined));
    const cooled = await eventually("the loop recording the operator's handoff", async () => {
      const s = await status();
      return (s.cooldowns.nodes[to] ?? 0) > Date.now() ? s : undefined;
    });
    expect(cooled.cooldowns.nodes[to]).toBeGreaterThan(Date.now());
    // A worker that starts now plans with the same partition cooldowns: its book lists them from visibility.
    let planned: PlanInput['cooldowns'] | undefined;
    const fresh = createRebalancerActivities({ cluster: suite.cluster.client, client: suite.client, setDraining: () => Promise.resolve(), plan: (input, config) => ((planned = input.cooldowns), planNow(input, config)) });
    await new MockActivityEnvironment({ taskQueue }).run(fresh.planMoves, { inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: Date.now(), cooled: true }, SETTINGS.planner);
    expect(planned?.moves?.[p.id]).toContainEqual({ from: p.owner, to, until: expect.any(Number) });
    const moves = await loopMovesFor(15_000);
    expect(moves.filter((m) => m.partition === p.id)).toEqual([]);
    expect((await suite.cluster.client.partition(p.id)).partition.owner).toBe(to);
    // The dry run agrees, and says what holds the handoff back.
    const plan = JSON.parse((await cli('plan', '--json')).out) as DryRun;
    expect(plan.loop.state).toBe('running');
    expect(plan.now.filter((s) => s.partition === p.id)).toEqual([]);
  });

  it("an operator's move sets the cooldowns of the loop's own: the copy stays where the operator put it", async () => {
    const before = await quiet('the cluster at rest before the move', 60_000);
    const nodes = before.topology.nodes.map((n) => n.id);
    const p = (await uncooled(before.topology, before.status)).find((x) => x.followers.length > 0 && nodes.some((n) => !holders(x).includes(n)))!;
    const from = p.followers[0]!;
    const to = nodes.find((n) => !holders(p).includes(n))!;
    const r = await cli('move', p.id, '--from', from, '--to', to, '--wait', '--reason', 'operator intent', '--json');
    expect(r.code).toBe(0);
    await eventually("the operator's move cooling its partition", async () => ((await cooledMoves())[p.id]?.some((m) => m.from === from && m.to === to) ? true : undefined));
    const moves = await loopMovesFor(15_000);
    expect(moves.filter((m) => m.partition === p.id)).toEqual([]);
    const now = (await suite.cluster.client.partition(p.id)).partition;
    expect(holders(now)).toContain(to);
    expect(holders(now)).not.toContain(from);
  });

  it("the dry run plans with the loop's live cooldowns and pause state, and its now is what the loop starts", async () => {
    await quiet('the cluster at rest before the pause', 60_000);
    await setPaused(suite.client, suite.scope, true, { by: 'test', reason: 'compare the dry run with the loop' });
    let resumed = false;
    try {
      await suite.cluster.client.joinNode('n5', 1, 'z1');
      const paused = await eventually('a dry run that proposes steps on a resume', async () => {
        const r = await cli('plan', '--json');
        expect(r.code).toBe(0);
        const plan = JSON.parse(r.out) as DryRun;
        return plan.onResume.length > 0 ? plan : undefined;
      });
      expect(paused.loop.state).toBe('paused');
      expect(paused.now).toEqual([]);
      expect(paused.startNow).toBe(0);
      // The earlier tests' moves still cool: the dry run saw them.
      expect(Object.keys(paused.loop.cooldowns.moves ?? {}).length).toBeGreaterThan(0);
      const text = await cli('plan');
      expect(text.out).toMatch(/^planned with the loop's live cooldowns \(\d+ partition\(s\), \d+ node\(s\)\) and its 0 move\(s\) in flight; the loop is paused by test/m);
      expect(text.out).toMatch(/^on a resume the loop starts \d+ step\(s\): /m);

      const resumedAt = Date.now();
      await setPaused(suite.client, suite.scope, false, { by: 'test', reason: 'compared' });
      resumed = true;
      const first = await eventually('the first tick after the resume', async () => {
        const s = await status();
        return s.lastPlan && s.lastPlan.at >= resumedAt ? s.lastPlan : undefined;
      });
      const key = (s: { op: string; partition: string; from: string; to: string }) => `${s.op} ${s.partition} ${s.from}->${s.to}`;
      expect(first.steps.filter((s) => first.started.includes(s.partition)).map(key)).toEqual(paused.onResume.map(key));
    } finally {
      if (!resumed) await setPaused(suite.client, suite.scope, false, { by: 'test', reason: 'test over' });
    }
  });

  it('a node that returns lifts the node cooldowns: copies that just arrived elsewhere may go on to it at once', async () => {
    await quiet('the cluster at rest before the drain', 120_000);
    expect((await cli('drain', 'n5', '--wait', '--reason', 'maintenance', '--json')).code).toBe(0);
    const before = await quiet('the loop at rest after the drain', 120_000);
    // An operator's move onto n1 gives the loop a node cooldown that holds n1 as a source for a minute.
    const p = before.topology.partitions.find((x) => !holders(x).includes('n1') && x.followers.length > 0)!;
    expect((await cli('move', p.id, '--from', p.followers[0]!, '--to', 'n1', '--wait', '--reason', 'operator intent', '--json')).code).toBe(0);
    await eventually("the loop recording the operator's move", async () => ((await status()).cooldowns.nodes.n1 ?? 0) > Date.now() + 10_000 || undefined);
    const back = Date.now();
    expect((await cli('undrain', 'n5', '--reason', 'maintenance done', '--json')).code).toBe(0);
    const lifted = await eventually('the loop lifting the node cooldowns as n5 returns', async () => {
      const s = await status();
      return s.lastPlan && s.lastPlan.at > back && s.cooldowns.nodes.n1 === undefined ? s : undefined;
    }, 20_000);
    expect(lifted.activeNodes).toContain('n5');
    // The partition cooldowns stay: the operator's copy is still not moved off n1.
    expect((await cooledMoves())[p.id]).toContainEqual({ from: p.followers[0], to: 'n1', until: expect.any(Number) });
    // n5 fills again at once; what the earlier tests' moves just put on other nodes waits out its partition cooldown.
    await eventually('n5 receiving copies again', async () => ((await suite.cluster.client.topology()).partitions.some((x) => holders(x).includes('n5')) ? true : undefined), 60_000);
    await replayAndKeep(suite.client, suite.w.rebalancerWorkflowId!, 'rebalancer-arrival-lifts-node-cooldowns', await loopRunId(suite.client, suite.w));
  });
});
