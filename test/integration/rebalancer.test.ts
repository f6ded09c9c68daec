/**
 * The rebalancer loop end to end: a real Temporal dev server, a reference cluster over HTTP and the project's
 * worker with its relay and loop. The cluster holds partitions q-400..q-411 only. Each test joins a node and
 * waits until every node is within threshold, or, while a drain runs, until the loop has filled the node that
 * joined around it.
 */
import type { Client } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { ClusterClient } from '../../cluster/client';
import { cooledMovesOf } from '../../operations/closed';
import { MoveRefused } from '../../operations/moves';
import { createRebalancerActivities } from '../../activities/rebalancer';
import { drainOutcome, drainStatus, rebalancerStatus, setPaused, startDrain } from '../../operations/rebalancer';
import type { Topology } from '../../cluster/contract';
import { DEFAULT_PLANNER_CONFIG, planNow, scoreNodes } from '../../planner';
import type { RebalancerWorker } from '../../worker/worker';
import { drainStatusQuery, type RebalancerSettings, type RebalancerStatus, type TrackedMove } from '../../rules/definitions';
import { cli, copiesOn, eventually, loopRunId, replayAndKeep, startLoopSuite, stopLoopSuite, type TestCluster } from './helpers';

const taskQueue = `rebalancer-loop-${process.pid}`;
const SETTINGS: RebalancerSettings = {
  planner: { ...DEFAULT_PLANNER_CONFIG, maxTransfersPerNode: 2, maxTransfersPerCluster: 4, nodeCooldownMs: 1_000, partitionCooldownMs: 2_000 },
  tickMs: 500,
  // Small, so the loop continues as new during the file and carries its state across.
  ticksPerRun: 10,
};

let cluster: TestCluster;
let client: Client;
let w: RebalancerWorker;
let running: Promise<void>;
let scope: string;

beforeAll(async () => {
  ({ cluster, client, w, running, scope } = await startLoopSuite(taskQueue, SETTINGS, 400, { recoveryDelayMs: 4_000 }));
});

afterAll(async () => {
  await stopLoopSuite({ cluster, client, w, running });
});

afterEach(async () => {
  expect((await cluster.client.invariants()).breaches).toEqual([]);
});

const status = (): Promise<RebalancerStatus> => rebalancerStatus(client, scope);

/** The child starts each workflow task of a history sent (the commands' events follow their task's completion). */
function startsPerTask(history: { events?: { workflowTaskCompletedEventAttributes?: unknown; startChildWorkflowExecutionInitiatedEventAttributes?: unknown }[] | null }): number[] {
  const out: number[] = [];
  for (const e of history.events ?? []) {
    if (e.workflowTaskCompletedEventAttributes) out.push(0);
    else if (e.startChildWorkflowExecutionInitiatedEventAttributes && out.length > 0) out[out.length - 1]!++;
  }
  return out;
}

/** Largest |score - mean| over the nodes, with nothing in flight and no cooldowns: what the planner sees at rest. */
function deviation(topology: Topology): number {
  const { mean, nodes } = scoreNodes({ topology, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: Date.now() }, SETTINGS.planner);
  return Math.max(...nodes.map((n) => Math.abs(n.total - mean)));
}

/** Every node within threshold and nothing in flight, as the loop reports and the broker shows. */
async function settled(what: string, timeoutMs = 150_000): Promise<{ topology: Topology; status: RebalancerStatus }> {
  return eventually(
    what,
    async () => {
      const [topology, s] = await Promise.all([cluster.client.topology(), status()]);
      const busy = topology.partitions.filter((p) => p.learners.length > 0 || p.leaving || p.admission === 'closed' || p.pendingRecovery).map((p) => p.id);
      const off = deviation(topology);
      // At rest also means the loop's last tick started nothing: a tick may still improve a cluster already inside the band.
      const resting = !s.lastPlan || !!s.lastPlan.idleReason;
      if (busy.length === 0 && s.inFlight.length === 0 && off <= SETTINGS.planner.threshold && resting) return { topology, status: s };
      // Thrown, so a timeout says why it never settled.
      throw new Error(`busy ${busy.join(',') || '-'}; ${s.inFlight.length} in flight; deviation ${off.toFixed(3)}; last plan: ${s.lastPlan?.idleReason ?? 'started moves'}; skipped: ${JSON.stringify(s.lastPlan?.skipped ?? [])}`);
    },
    timeoutMs,
  );
}

/**
 * Watches every partition while the loop works: a partition with a follower move in progress (a learner or a
 * leaving replica) must never be fenced (recovery pending or admission closed).
 */
function watchFences() {
  let done = false;
  let fencedSamples = 0;
  let samples = 0;
  const watching = (async () => {
    while (!done) {
      const t = await cluster.client.topology();
      for (const p of t.partitions) {
        if ((p.learners.length > 0 || p.leaving) && (p.pendingRecovery || p.admission === 'closed')) fencedSamples++;
      }
      samples++;
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    async stop() {
      done = true;
      await watching;
      return { fencedSamples, samples };
    },
  };
}

describe('rebalancer loop', () => {
  it('brings a node that joins under publishing load within threshold, follower moves never fenced', async () => {
    const before = await settled('the initial cluster at rest', 30_000);
    expect(before.status.moves.started).toBe(0);
    const tails = new Map((await Promise.all(before.topology.partitions.map((p) => cluster.client.progress(p.id)))).map((p) => [p.partition, p.confirmedTail]));

    const watch = watchFences();
    await cluster.client.joinNode('n4', 1, 'z1');
    const after = await settled('every node within threshold after n4 joined');
    const fences = await watch.stop();

    expect(fences.samples).toBeGreaterThan(10);
    expect(fences.fencedSamples).toBe(0);
    expect(after.topology.partitions.filter((p) => [p.owner, ...p.followers].includes('n4')).length).toBeGreaterThanOrEqual(6);
    expect(after.status.moves.completed).toBeGreaterThanOrEqual(6);
    expect(after.status.moves.aborted).toBe(0);
    expect(after.status.state).toBe('running');
    // The relay forwarded the node_joined event to the loop.
    expect(after.status.lastSignalSeq).toBeGreaterThan(0);
    expect(after.status.lastPlan?.idleReason).toBeTruthy();
    // Publishes kept confirming on every partition while copies moved.
    for (const p of after.topology.partitions) expect((await cluster.client.progress(p.id)).confirmedTail).toBeGreaterThan(tails.get(p.id)!);
    // The tick count only passes ticksPerRun when the loop carried its state across continue-as-new.
    expect(after.status.ticks).toBeGreaterThan(SETTINGS.ticksPerRun);
    // A tick's starts go to the server together, in one workflow task (patch start-moves-together), where one at a
    // time, each waiting for the server, had a tick at 1,000 nodes start 2 moves a second.
    let together = 0;
    const types = new Set<string>();
    for await (const run of client.workflow.list({ query: `WorkflowId = "${w.rebalancerWorkflowId}"` })) {
      const history = await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
      together = Math.max(together, ...startsPerTask(history));
      for (const e of history.events ?? []) if (e.startChildWorkflowExecutionInitiatedEventAttributes) types.add(e.startChildWorkflowExecutionInitiatedEventAttributes.workflowType!.name!);
    }
    expect(together).toBeGreaterThanOrEqual(2);
    // Its follower moves run as the type that folded the step library's patches (patch follower-move-v3).
    expect(types.has('followerMoveV3')).toBe(true);
    expect(types.has('followerMoveV2')).toBe(false);
    // A run that started moves and continued as new replays under the current code, and is kept.
    for await (const run of client.workflow.list({ query: `WorkflowId = "${w.rebalancerWorkflowId}" AND ExecutionStatus = "ContinuedAsNew"` })) {
      if (startsPerTask(await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory()).every((n) => n === 0)) continue;
      await replayAndKeep(client, run.workflowId, 'rebalancer-started-follower-move-v3', run.runId);
      break;
    }
  });

  it('pause and resume record who and why; paused, it starts nothing', async () => {
    await expect(setPaused(client, scope, true, { by: 'alice', reason: '  ' })).rejects.toThrow(/pause needs a reason/);
    await expect(setPaused(client, scope, false, { by: 'alice', reason: 'go' })).rejects.toThrow(/not paused/);
    const paused = await setPaused(client, scope, true, { by: 'alice', reason: 'disk upgrade on n2' });
    expect(paused).toMatchObject({ state: 'paused', paused: { by: 'alice', reason: 'disk upgrade on n2' } });
    const refused = await setPaused(client, scope, true, { by: 'bob', reason: 'again' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(MoveRefused);
    expect((refused as MoveRefused).message).toMatch(/already paused by alice \(disk upgrade on n2\)/);

    const started = paused.moves.started;
    await cluster.client.joinNode('n5', 1, 'z1');
    // Several ticks and the join's wake-up pass: nothing starts while paused.
    const ticks = (await status()).ticks;
    await eventually('several ticks while paused', async () => ((await status()).ticks >= ticks + 4 ? true : undefined), 30_000);
    const still = await status();
    expect(still.moves.started).toBe(started);
    expect(still.state).toBe('paused');
    expect(still.waitingFor).toMatch(/a resume \(paused by alice: disk upgrade on n2\)/);

    const resumed = await setPaused(client, scope, false, { by: 'bob', reason: 'upgrade done' });
    expect(resumed).toMatchObject({ state: 'running', paused: null, lastResumed: { by: 'bob', reason: 'upgrade done' } });
    const after = await settled('every node within threshold after n5 joined and the loop resumed');
    expect(after.status.moves.started).toBeGreaterThan(started);
  });

  it('a recovery opened midway pauses the loop; after activation it plans again and settles', async () => {
    await cluster.client.joinNode('n6', 1, 'z1');
    const move = await eventually('a planned move catching up', async () => {
      const s = await status();
      const m = s.inFlight.find((x) => x.op === 'follower_move');
      if (!m) return undefined;
      const p = (await cluster.client.partition(m.partition)).partition;
      return p.learners.includes(m.to) ? m : undefined;
    });
    // Hold the move before the swap, then fail its partition's owner: the planner's move ends aborted.
    await cluster.client.fault({ fault: 'stall-transfer', partition: move.partition, node: move.to, stalled: true });
    // A failure below must not leave the transfer stalled for the tests after this one.
    onTestFinished(() => cluster.client.fault({ fault: 'stall-transfer', partition: move.partition, node: move.to, stalled: false }).then(() => undefined));
    await cluster.client.fault({ fault: 'fail-owner', partition: move.partition });
    // The loop reads the topology twice a tick (its snapshot, then the planner's input): a recovery opened between
    // the two shows first in the plan's idle reason, with the loop waiting for its next tick; that tick's snapshot
    // then has it wait for the activation.
    const during = await eventually('the loop waiting for the recovery', async () => {
      const s = await status();
      return /the recovery to activate/.test(s.waitingFor ?? '') ? s : undefined;
    });
    expect(during.lastPlan?.idleReason).toMatch(/recovery (is )?pending/);
    // While the recovery is pending, no move starts.
    for (;;) {
      const [p, s] = await Promise.all([cluster.client.partition(move.partition), status()]);
      if (!p.partition.pendingRecovery) break;
      expect(s.moves.started).toBe(during.moves.started);
      await new Promise((r) => setTimeout(r, 200));
    }
    await cluster.client.fault({ fault: 'stall-transfer', partition: move.partition, node: move.to, stalled: false });
    const after = await settled('every node within threshold after the recovery activated');
    expect(after.status.moves.aborted).toBeGreaterThanOrEqual(1);
    expect(after.status.moves.started).toBeGreaterThan(during.moves.started);
  });

  it('the CLI: status, pause and resume with --json; a pause without --reason is bad usage', async () => {
    const noReason = await cli('pause', '--json');
    expect(noReason.code).toBe(2);
    expect(noReason.err).toMatch(/required option '--reason <text>' not specified/);
    const empty = await cli('pause', '--reason', ' ', '--json');
    expect(empty.code).toBe(2);
    expect(JSON.parse(empty.out)).toMatchObject({ ok: false, code: 'bad_usage', message: expect.stringMatching(/invalid --reason for pause/) });

    const paused = await cli('pause', '--reason', 'maintenance window', '--by', 'carol', '--json');
    expect(paused.code).toBe(0);
    expect(JSON.parse(paused.out)).toMatchObject({ state: 'paused', paused: { by: 'carol', reason: 'maintenance window' } });
    const again = await cli('pause', '--reason', 'again', '--json');
    expect(again.code).toBe(1);
    expect(JSON.parse(again.out)).toMatchObject({ ok: false, code: 'pause_refused', message: expect.stringMatching(/already paused by carol \(maintenance window\)/) });
    const shown = await cli('status');
    expect(shown.out).toMatch(/^rebalancer: +paused by carol at .*: maintenance window$/m);
    expect(shown.out).toMatch(/^last plan: /m);
    const resumed = await cli('resume', '--reason', 'window over', '--by', 'carol');
    expect(resumed).toMatchObject({ code: 0, out: 'resumed by carol: window over\n' });
    expect(JSON.parse((await cli('status', '--json')).out)).toMatchObject({ state: 'running', lastResumed: { by: 'carol', reason: 'window over' } });
  });

  it('while a drain of one node runs, the loop balances a node that joined, leaving the drained node and its partitions alone', async () => {
    await settled('the cluster at rest before the drain');
    // One move at a time, continuing as new every other tick: the drain holds one transfer slot and leaves the loop three.
    const drainSettings: RebalancerSettings = { ...SETTINGS, ticksPerRun: 2, planner: { ...SETTINGS.planner, maxTransfersPerNode: 1, maxTransfersPerCluster: 1 } };
    const handle = await startDrain({ client, cluster: cluster.client, taskQueue }, { node: 'n2', by: 'test', reason: 'drain beside the loop', settings: drainSettings });
    // Read at once: its first run ticks twice (marking the node and planning take longer) before it continues as new.
    const firstRun = (await handle.describe()).runId;
    // Hold the drain's first follower move before its swap: the drain runs on, most of n2 still on it.
    const held = await eventually('a move off n2 catching up', async () => {
      const s = await handle.query(drainStatusQuery);
      const m = s.inFlight.find((x) => x.op === 'follower_move');
      if (!m) return undefined;
      const p = (await cluster.client.partition(m.partition)).partition;
      return p.learners.includes(m.to) ? m : undefined;
    });
    await cluster.client.fault({ fault: 'stall-transfer', partition: held.partition, node: held.to, stalled: true });
    const onN2 = await copiesOn(cluster.client, 'n2');
    expect(onN2.length).toBeGreaterThanOrEqual(4);

    await cluster.client.joinNode('n7', 1, 'z1');
    const loopMoves: TrackedMove[] = [];
    const filled = await eventually(
      'the loop moving copies onto n7 while the drain of n2 holds its move',
      async () => {
        const s = await status();
        loopMoves.push(...s.inFlight);
        const onN7 = await copiesOn(cluster.client, 'n7');
        // Two copies, or one and the loop saying that what is left for n7 is held by the drain: which copies n7 may
        // take without worsening a partition's spread over zones depends on where earlier tests left them, and the
        // drain holds every partition with a copy on n2 while its move stalls.
        if (onN7.length >= 2 || (onN7.length >= 1 && /while another drain holds it/.test(s.lastPlan?.idleReason ?? ''))) return { status: s, onN7 };
        throw new Error(`${onN7.length} copies on n7; last plan: ${s.lastPlan?.idleReason ?? 'started moves'}; skipped: ${JSON.stringify(s.lastPlan?.skipped ?? [])}`);
      },
      90_000,
    );
    // The drain was still on its first follower move, and none of the loop's moves touched n2 or a partition on it.
    const drain = await drainStatus(client, 'n2');
    expect(drain.phase).toBe('moving_followers');
    expect(drain.inFlight.map((m) => m.partition)).toEqual([held.partition]);
    expect(loopMoves.length).toBeGreaterThan(0);
    for (const m of loopMoves) {
      expect([m.from, m.to]).not.toContain('n2');
      expect(onN2).not.toContain(m.partition);
    }
    expect(filled.status.lastPlan?.skipped.filter((x) => /draining/.test(x.reason)) ?? []).toEqual([]);

    // A tracked reconfiguration that continued as new is followed to its chain's end (the drain stands in for a
    // move here: it continues as new every other tick), without waiting on the chain inside the snapshot.
    expect((await handle.describe()).runId).not.toBe(firstRun);
    const activities = createRebalancerActivities({ cluster: cluster.client, client, setDraining: () => Promise.resolve(), plan: planNow });
    const chain: TrackedMove = { ...held, workflowId: handle.workflowId, runId: firstRun };
    const timeout = new Promise<'timed out'>((r) => setTimeout(() => r('timed out'), 10_000));
    expect(await Promise.race([activities.rebalancerSnapshot([chain]).then((x) => x.ended), timeout])).toEqual([]);

    await cluster.client.fault({ fault: 'stall-transfer', partition: held.partition, node: held.to, stalled: false });
    expect(await drainOutcome(handle)).toMatchObject({ status: 'completed', node: 'n2' });
    expect(await copiesOn(cluster.client, 'n2')).toEqual([]);
    expect((await activities.rebalancerSnapshot([chain])).ended).toEqual([{ workflowId: handle.workflowId, runId: firstRun, status: 'completed', detail: null }]);
  });

  it('continues as new with a move in flight and still counts its end: in-flight count drops, cooldown recorded', async () => {
    await cluster.client.joinNode('n8', 1, 'z1');
    const move = await eventually('a planned move onto n8 catching up', async () => {
      const m = (await status()).inFlight.find((x) => x.op === 'follower_move' && x.to === 'n8');
      if (!m) return undefined;
      const p = (await cluster.client.partition(m.partition)).partition;
      return p.learners.includes(m.to) ? m : undefined;
    });
    await cluster.client.fault({ fault: 'stall-transfer', partition: move.partition, node: move.to, stalled: true });
    const run = await loopRunId(client, w);
    const carried = await eventually('the loop to continue as new with the move in flight', async () => {
      const [now, s] = await Promise.all([loopRunId(client, w), status()]);
      return now !== run ? s : undefined;
    });
    expect(carried.inFlight.map((m) => m.runId)).toContain(move.runId);
    const completed = carried.moves.completed;

    await cluster.client.fault({ fault: 'stall-transfer', partition: move.partition, node: move.to, stalled: false });
    const after = await eventually('the loop to see the move end', async () => {
      const s = await status();
      return s.inFlight.some((m) => m.runId === move.runId) ? undefined : s;
    });
    expect(after.moves.completed).toBeGreaterThan(completed);
    // Its partition cooldown is kept by the worker, as visibility lists it; the loop carries only the count.
    expect(after.cooling).toBeGreaterThan(0);
    expect((await cooledMovesOf(client, taskQueue, SETTINGS.planner.partitionCooldownMs))[move.partition]).toContainEqual({ from: move.from, to: move.to, until: expect.any(Number) });
    expect(after.startedByOp?.follower_move).toBeGreaterThan(0);
    // The run that carried the move across continue-as-new replays under the current code, and is kept.
    await replayAndKeep(client, w.rebalancerWorkflowId!, 'rebalancer-move-carried-across-continue-as-new', run);
  });
  it('reads the broker\'s topology once a tick: the plan takes what the tick\'s snapshot read', async () => {
    // The worker runs in this process: every topology read of the loop's activities passes here. Nothing else reads
    // it meanwhile (the relay reads the event feed, moves read their partition).
    const reads = vi.spyOn(ClusterClient.prototype, 'topology');
    try {
      const from = (await status()).ticks;
      const seen = reads.mock.calls.length;
      const s = await eventually('six more ticks', async () => {
        const now = await status();
        return now.ticks >= from + 6 && !now.paused ? now : undefined;
      });
      // A tick that starts nothing still snapshots and plans: twice the ticks, before the plan took the snapshot's.
      expect(reads.mock.calls.length - seen).toBeLessThanOrEqual(s.ticks - from + 1);
    } finally {
      reads.mockRestore();
    }
  });
});
