/**
 * The loop with the DEFAULT cooldowns (node 1 minute, partition 5 minutes), end to end on a real dev server and
 * reference cluster: a node that joins receives its follower copies and then the owner handoffs that finish the
 * job without waiting out the partition cooldown; an operator's handoff and move set the same cooldowns as the
 * loop's own moves, so the loop does not undo them; the dry run plans with the loop's live state and its "now" is
 * what the loop starts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { DryRun } from '../../client/dry-run';
import { rebalancerStatus, setPaused } from '../../client/rebalancer';
import type { Topology } from '../../cluster/contract';
import { DEFAULT_PLANNER_CONFIG, planNow, scoreNodes } from '../../planner';
import type { RebalancerSettings, RebalancerStatus } from '../../workflows/definitions';
import { holders } from '../../workflows/rebalancer-rules';
import { cli, eventually, logger, startLoopSuite, stopLoopSuite, type LoopSuite } from './helpers';

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

const noCooldowns = (topology: Topology) => ({ topology, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: Date.now() });

/** Every node within threshold, nothing in flight, and the loop's last tick started nothing. */
async function settled(what: string, timeoutMs: number): Promise<{ topology: Topology; status: RebalancerStatus }> {
  return eventually(
    what,
    async () => {
      const [topology, s] = await Promise.all([suite.cluster.client.topology(), status()]);
      const busy = topology.partitions.filter((p) => p.learners.length > 0 || p.leaving || p.admission === 'closed' || p.pendingRecovery).map((p) => p.id);
      const { mean, nodes } = scoreNodes(noCooldowns(topology), SETTINGS.planner);
      const off = Math.max(...nodes.map((n) => Math.abs(n.total - mean)));
      const resting = !!s.lastPlan?.idleReason;
      if (busy.length === 0 && s.inFlight.length === 0 && off <= SETTINGS.planner.threshold && resting) return { topology, status: s };
      throw new Error(`busy ${busy.join(',') || '-'}; ${s.inFlight.length} in flight; deviation ${off.toFixed(3)}; last plan: ${s.lastPlan?.idleReason ?? 'started moves'}`);
    },
    timeoutMs,
  );
}

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

describe('rebalancer loop with the default cooldowns', () => {
  it('a node joins: its follower copies and then the owner handoffs onto it, without waiting out the partition cooldown', async () => {
    await settled('the initial cluster at rest', 60_000);
    const joined = Date.now();
    await suite.cluster.client.joinNode('n4', 1, 'z1');
    const after = await settled('every node within threshold after n4 joined', SETTINGS.planner.partitionCooldownMs);
    const seconds = (Date.now() - joined) / 1000;
    logger.info({ seconds }, 'settled after the join');
    console.log(`n4 joined: settled in ${seconds.toFixed(1)} s (partition cooldown ${SETTINGS.planner.partitionCooldownMs / 1000} s)`);
    expect(after.status.startedByOp?.follower_move).toBeGreaterThan(0);
    expect(after.status.startedByOp?.owner_handoff).toBeGreaterThan(0);
    const owned = after.topology.partitions.filter((p) => p.owner === 'n4');
    expect(owned.length).toBeGreaterThan(0);
    // Those handoffs went to n4 while the cooldowns of the copies that had just arrived there still ran.
    for (const p of owned) expect(after.status.cooldowns.moves?.[p.id]?.some((m) => m.to === 'n4')).toBe(true);
    expect(seconds * 1000).toBeLessThan(SETTINGS.planner.partitionCooldownMs / 2);
  });

  it("the dry run plans with the loop's live cooldowns and pause state, and its now is what the loop starts", async () => {
    await setPaused(suite.client, suite.scope, true, { by: 'test', reason: 'compare the dry run with the loop' });
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
    // The join's copies and handoffs still cool: the dry run saw them.
    expect(Object.keys(paused.loop.cooldowns.moves ?? {}).length).toBeGreaterThan(0);
    const text = await cli('plan');
    expect(text.out).toMatch(/^planned with the loop's live cooldowns \(\d+ partition\(s\), \d+ node\(s\)\) and its 0 move\(s\) in flight; the loop is paused by test/m);
    expect(text.out).toMatch(/^on a resume the loop starts \d+ step\(s\): /m);

    const resumedAt = Date.now();
    await setPaused(suite.client, suite.scope, false, { by: 'test', reason: 'compared' });
    const first = await eventually('the first tick after the resume', async () => {
      const s = await status();
      return s.lastPlan && s.lastPlan.at >= resumedAt ? s.lastPlan : undefined;
    });
    const key = (s: { op: string; partition: string; from: string; to: string }) => `${s.op} ${s.partition} ${s.from}->${s.to}`;
    const started = first.steps.filter((s) => first.started.includes(s.partition)).map(key);
    expect(started).toEqual(paused.onResume.map(key));

    // Running, with moves in flight: the dry run counts them and says so.
    const live = JSON.parse((await cli('plan', '--json')).out) as DryRun;
    expect(live.loop.state).toBe('running');
    expect(live.loop.summary).toMatch(/the loop is running/);
    await settled('every node within threshold after n5 joined', SETTINGS.planner.partitionCooldownMs);
  });

  it("an operator's handoff sets the cooldowns of the loop's own: the loop does not hand ownership back", async () => {
    const before = await settled('the cluster at rest before the handoff', 120_000);
    // Ownership onto the node that owns the most already: the handoff puts it above the band.
    const owns = (n: string) => before.topology.partitions.filter((x) => x.owner === n).length;
    const p = before.topology.partitions.filter((x) => x.followers.length > 0).sort((a, b) => Math.max(...b.followers.map(owns)) - Math.max(...a.followers.map(owns)))[0]!;
    const to = [...p.followers].sort((a, b) => owns(b) - owns(a))[0]!;
    const r = await cli('handoff', p.id, '--to', to, '--wait', '--reason', 'operator intent', '--json');
    expect(r.code).toBe(0);
    const cooled = await eventually("the loop recording the operator's handoff", async () => {
      const s = await status();
      return s.cooldowns.moves?.[p.id]?.some((m) => m.from === p.owner && m.to === to) ? s : undefined;
    });
    expect(cooled.cooldowns.nodes[to]).toBeGreaterThan(Date.now());
    // Without the cooldowns the planner hands ownership off the node that took it: there is something to undo.
    const now = await suite.cluster.client.topology();
    expect(planNow(noCooldowns(now), SETTINGS.planner).steps.some((s) => s.op === 'owner_handoff' && s.from === to)).toBe(true);
    const moves = await loopMovesFor(15_000);
    expect(moves.filter((m) => m.partition === p.id)).toEqual([]);
    expect((await suite.cluster.client.partition(p.id)).partition.owner).toBe(to);
    // The dry run agrees: nothing hands it back now.
    const plan = JSON.parse((await cli('plan', '--json')).out) as DryRun;
    expect(plan.now.filter((s) => s.partition === p.id)).toEqual([]);
  });

  it("an operator's move sets the cooldowns of the loop's own: the copy stays where the operator put it", async () => {
    const before = await settled('the cluster at rest before the move', 120_000);
    const nodes = before.topology.nodes.map((n) => n.id);
    const p = before.topology.partitions.find((x) => x.followers.length > 0 && nodes.some((n) => !holders(x).includes(n)))!;
    const from = p.followers[0]!;
    const to = nodes.find((n) => !holders(p).includes(n))!;
    const r = await cli('move', p.id, '--from', from, '--to', to, '--wait', '--reason', 'operator intent', '--json');
    expect(r.code).toBe(0);
    await eventually("the loop recording the operator's move", async () => {
      const s = await status();
      return s.cooldowns.moves?.[p.id]?.some((m) => m.from === from && m.to === to) ? s : undefined;
    });
    const moves = await loopMovesFor(15_000);
    expect(moves.filter((m) => m.partition === p.id)).toEqual([]);
    const now = (await suite.cluster.client.partition(p.id)).partition;
    expect(holders(now)).toContain(to);
    expect(holders(now)).not.toContain(from);
  });
});
