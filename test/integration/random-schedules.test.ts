/**
 * Random schedules through the real workflows: each schedule starts one real reconfiguration (follower move, owner
 * handoff, owner move, replication-factor increase or lost-follower replacement, in turn) on a fresh partition of
 * the reference cluster and injects 1-3 faults drawn from a seeded generator (schedules.ts) just before or after
 * one of its guarded writes or at a random time: a node crash (restarted 1-3 s later with its disk), a disk loss,
 * an owner failure, a refused write, a lost reply (the write took effect, its reply never came: the activity
 * tries again with the same key), an operator cancel, a worker stopped and replaced (its workflow cache dropped:
 * the new worker replays every running history) and, once in 25 schedules, a Temporal dev server restart. Each
 * schedule asserts that the operation ends (completed, aborted with a code and a reason, or cancelled) within a
 * bound derived from its bytes, that the final assignment matches how it ended, zero invariant breaches, and that
 * every fault fired whose write or time the operation reached; at the end every history replays strictly and the
 * coverage floors hold.
 *
 * RANDOM_SCHEDULES_SEED (default 1919) and RANDOM_SCHEDULES_COUNT (default 80, about five minutes on a loaded
 * 2-core machine) choose the run; the seed is printed first and in every failure. Partitions q-700 and up
 * (q-<700 + i> for schedule i), each deleted once checked so a later schedule's faults cannot touch it.
 *
 * The cluster runs on the wall clock (50 ms ticks), like every integration suite: its stepped clock moves only
 * when the test advances it, while the workflows' timers, polls and activity retries run on Temporal's wall
 * clock, so a stepped cluster would stand still under a waiting workflow and no bound in real time would hold.
 * The whole file runs on a dev server of its own (namespace `default`), which is what a Temporal restart stops.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRequirement, type Partition } from '../../cluster/contract';
import { startGrow, startReplace } from '../../operations/grow';
import { startHandoff, startOwnerMove } from '../../operations/handoff';
import { cancelMove, MoveRefused, outcomeOf, startFollowerMove, type MovesContext } from '../../operations/moves';
import { reconfigurationWorkflowId, statusQuery, type MoveOutcome } from '../../rules/definitions';
import { WORKFLOWS_PATH } from '../../worker/worker';
import { settled } from './grow-helpers';
import { connectClient, counted, startTestCluster, startWorker, type TestCluster } from './helpers';
import { restartableTemporal, type Restartable } from './processes';
import { withHistoryExcerpt } from './history-excerpt';
import { boundMs, bump, describeSchedule, emptyCoverage, FAULT_KINDS, generate, KINDS, type Role, type Schedule } from './schedules';
import { armFault, type Armed } from './write-faults';

const SEED = Number(process.env.RANDOM_SCHEDULES_SEED ?? 1919);
const COUNT = Number(process.env.RANDOM_SCHEDULES_COUNT ?? 80);
const FIRST_PARTITION = 700;
const NODES = ['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7', 'n8'];
/** startTestCluster's tuning, named here because the bounds are derived from it. */
const RATES = { transferBytesPerSec: 4 * 1024 * 1024, perNodeLimit: 4, recoveryDelayMs: 500 };
const TIMING = { pollMs: 500, retryMs: 300 };
/** A handoff closes admission within a second rather than waiting up to 30 s for a quiet point. */
const QUIET = { maxWaitMs: 1_000 };
/** Once an operation ended: its heals, a worker or Temporal restart it set off, and the partition settling. */
const AFTERMATH_MS = 120_000;

const header = `random schedules: seed ${SEED}, ${COUNT} schedules`;
const schedules = generate(SEED, COUNT, NODES, FIRST_PARTITION);
const coverage = emptyCoverage();
const histories: { workflowId: string; history: History; what: string }[] = [];

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;

let temporal: Restartable;
let cluster: TestCluster;
let client: Client;
let worker: Awaited<ReturnType<typeof startWorker>>;
const taskQueue = `random-schedules-${process.pid}`;

/** The faults armed at the write boundaries of each partition, and the writes its operation sent. */
const armed = new Map<string, Armed[]>();
const sent = new Map<string, Set<string>>();
const wrap = (real: Parameters<typeof armFault>[0]) =>
  armFault(real, (partition, write) => {
    sent.get(partition)?.add(write);
    return armed.get(partition)?.find((a) => !a.fired && a.write === write) ?? null;
  });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `promise`, or a rejection with `what` after `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: () => Promise<string> | string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => void Promise.resolve(what()).then((w) => reject(new Error(w)), (e: unknown) => reject(e as Error)), Math.max(0, ms));
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function restartWorker(): Promise<void> {
  const old = worker;
  old.w.shutdown();
  await old.running;
  worker = await startWorker(cluster.url, taskQueue, wrap, temporal.address);
}

/** Clients of the dev server before a restart: closed at the end, since a long poll still on one would throw unhandled. */
const oldClients: Client[] = [];

async function restartTemporal(): Promise<void> {
  await temporal.restart(1_000);
  oldClients.push(client);
  client = await connectClient(temporal.address);
}

beforeAll(async () => {
  console.log(header);
  temporal = await restartableTemporal();
  cluster = await startTestCluster(RATES, { nodes: NODES.length, partitions: 0, streams: 0 });
  client = await connectClient(temporal.address);
  worker = await startWorker(cluster.url, taskQueue, wrap, temporal.address);
});

afterAll(async () => {
  console.log(
    `${header}: ran ${coverage.schedules}; by kind ${JSON.stringify(coverage.byKind)}; faults planned ${JSON.stringify(coverage.planned)}, ` +
      `fired ${JSON.stringify(coverage.fired)}, not reached ${JSON.stringify(coverage.unreached)}; outcomes ${JSON.stringify(coverage.outcomes)}; ` +
      `slowest ${Math.round(coverage.worstBoundUse * 100)}% of its bound`,
  );
  worker?.w.shutdown();
  await worker?.running;
  for (const c of [...oldClients, client]) await c?.connection.close();
  await cluster?.close();
  await temporal?.close();
});

/** What happened to one planned fault. */
type Fate = 'planned' | 'fired' | 'unreached';

/** One schedule's run: its nodes by role, the fate of each fault, and what it set off that has to finish. */
interface Run {
  s: Schedule;
  nodes: Record<Role, string>;
  fates: Fate[];
  pending: Promise<unknown>[];
  ended: boolean;
}

/** Applies a fault now. Node faults and refusals take effect before the write goes on; restarts and cancels run beside it. */
async function inject(run: Run, i: number): Promise<void> {
  const f = run.s.faults[i]!;
  const { partition } = run.s;
  const node = f.role ? run.nodes[f.role] : '';
  const fire = () => (run.fates[i] = 'fired');
  switch (f.kind) {
    case 'crash-node':
    case 'lose-disk':
      await cluster.client.fault({ fault: 'crash-node', node });
      if (f.kind === 'lose-disk') await cluster.client.fault({ fault: 'lose-disk', node });
      fire();
      run.pending.push(sleep(f.healMs).then(() => cluster.client.fault({ fault: 'restart-node', node })));
      return;
    case 'fail-owner':
      await cluster.client.fault({ fault: 'fail-owner', partition });
      fire();
      return;
    case 'refuse-write':
      await cluster.client.fault({ fault: 'refuse-next-write', partition, write: 'write' in f.trigger ? f.trigger.write : undefined });
      fire();
      return;
    case 'lost-reply':
      fire();
      throw new Error(`the reply to ${'write' in f.trigger ? f.trigger.write : 'a write'} on ${partition} was lost (injected)`);
    case 'cancel':
      run.pending.push(
        cancelMove(client, partition, 'random schedule: operator cancel').then(fire, (err: unknown) => {
          // Refused past the point of no return: the cancel reached the workflow. No move: it had ended already.
          if (!(err instanceof MoveRefused)) throw err;
          run.fates[i] = err.code === 'cancel_refused' ? 'fired' : 'unreached';
        }),
      );
      return;
    case 'worker-restart':
      fire();
      run.pending.push(restartWorker());
      return;
    case 'temporal-restart':
      fire();
      run.pending.push(restartTemporal());
      return;
  }
}

/** Arms each fault at its write boundary, or sets its timer. */
function arm(run: Run): void {
  const boundary: Armed[] = [];
  run.s.faults.forEach((f, i) => {
    const t = f.trigger;
    if ('afterMs' in t) {
      run.pending.push(sleep(t.afterMs).then(() => (run.ended ? void (run.fates[i] = 'unreached') : inject(run, i))));
      return;
    }
    boundary.push({ partition: run.s.partition, write: t.write, when: t.when, faults: [], fired: false, hook: () => inject(run, i) });
  });
  armed.set(run.s.partition, boundary);
}

/** Starts the schedule's operation; a target refused for zones gives way to the next candidate. */
async function start(run: Run): Promise<void> {
  const { s } = run;
  const ctx: MovesContext = { client, cluster: cluster.client, taskQueue };
  const { owner, R } = run.nodes;
  const common = { partition: s.partition, origin: 'operator' as const, timing: TIMING };
  if (s.kind === 'owner-handoff') {
    await startHandoff(ctx, { ...common, from: owner, to: R, quietPoint: QUIET });
    return;
  }
  for (const T of s.targets) {
    run.nodes.T = T;
    try {
      if (s.kind === 'follower-move') await startFollowerMove(ctx, { ...common, from: R, to: T });
      else if (s.kind === 'owner-move') await startOwnerMove(ctx, { ...common, from: owner, to: T, via: R, quietPoint: QUIET });
      else if (s.kind === 'grow') await startGrow(ctx, { ...common, to: T });
      else await startReplace(ctx, { ...common, lost: R, with: T });
      return;
    } catch (err) {
      if (!(err instanceof MoveRefused && err.code === 'same_zone')) throw err;
    }
  }
  throw new Error(`${describeSchedule(s)}: every target was refused for zones`);
}

/**
 * Waits for the operation's outcome until the bound. A long poll on a dev server that restarted may never answer,
 * so every 10 s it asks again on the client of the moment.
 */
async function endOf(run: Run, bound: number, startedAt: number, fail: (what: string) => Promise<string>): Promise<MoveOutcome> {
  const workflowId = reconfigurationWorkflowId(run.s.partition);
  let last = '';
  for (;;) {
    const left = startedAt + bound - Date.now();
    if (left <= 0) throw new Error(await fail(`did not end within its bound of ${bound} ms${last ? ` (last error: ${last})` : ''}`));
    const ending = outcomeOf(client.workflow.getHandle(workflowId)).then((outcome) => ({ outcome }), (err: unknown) => ({ err: err as Error }));
    const got = await Promise.race([ending, sleep(Math.min(left, 10_000)).then(() => null)]);
    if (got === null) continue;
    if ('err' in got) {
      // The dev server restarting.
      last = got.err.message;
      await sleep(500);
      continue;
    }
    if (got.outcome === null) throw new Error(await fail('ended without an outcome (terminated or timed out)'));
    return got.outcome;
  }
}

const replaced = (p: Partition, from: string, to: string) => counted(p).map((n) => (n === from ? to : n)).sort();

/** The final assignment matches how the operation ended. */
function expectAssignment(run: Run, before: Partition, after: Partition, outcome: MoveOutcome): void {
  const { s, nodes } = run;
  const { owner, R, T } = nodes;
  expect([after.learners, after.leaving, after.admission]).toEqual([[], null, 'open']);
  // A failed owner, or a crash of the owner before or after the handoff, moves ownership by the broker's recovery.
  const fired = s.faults.filter((_, i) => run.fates[i] === 'fired');
  const owners: Role[] = ['owner', s.kind === 'owner-handoff' ? 'R' : 'T'];
  const ownerHit = fired.some((f) => f.kind === 'fail-owner' || (f.role !== undefined && owners.includes(f.role)));
  const done = outcome.status === 'completed';
  if (s.kind === 'grow') {
    const rf = before.replicationFactor + (done ? 1 : 0);
    expect(counted(after)).toEqual(done ? [...counted(before), T].sort() : counted(before));
    expect([after.replicationFactor, after.writeRequirement]).toEqual([rf, writeRequirement(after.durability, rf)]);
    return;
  }
  expect([after.replicationFactor, after.writeRequirement]).toEqual([before.replicationFactor, before.writeRequirement]);
  if (s.kind === 'owner-handoff') {
    expect(counted(after)).toEqual(counted(before));
    if (done) expect(after.epoch).toBeGreaterThan(before.epoch);
    if (!ownerHit) expect([after.owner, after.epoch]).toEqual(done ? [R, before.epoch + 1] : [owner, before.epoch]);
    return;
  }
  const moved = replaced(before, R, T);
  if (s.kind === 'owner-move') {
    // Aborted or cancelled in the handoff stage, the follower stage stands: T holds the copy of R as a follower.
    if (done) expect(counted(after)).toEqual(moved);
    else expect([counted(before), moved]).toContainEqual(counted(after));
    if (!ownerHit) expect(after.owner).toBe(done ? T : owner);
    return;
  }
  expect(counted(after)).toEqual(done ? moved : counted(before));
  if (done) expect(after.history.map((h) => h.node)).not.toContain(R);
}

/** The ending itself: what it names, and a cancelled ending only when a cancel was accepted. */
function expectOutcome(run: Run, outcome: MoveOutcome): void {
  expect(outcome.partition).toBe(run.s.partition);
  expect(outcome.kind).toBe(run.s.kind);
  if (outcome.status === 'aborted') expect([outcome.code.length > 0, outcome.reason.length > 0]).toEqual([true, true]);
  if (outcome.status === 'cancelled') {
    expect(outcome.reason).toMatch(/random schedule: operator cancel/);
    expect(run.s.faults.some((f, i) => f.kind === 'cancel' && run.fates[i] === 'fired')).toBe(true);
  }
  if (outcome.status === 'completed') expect(outcome.to).toBe(run.s.kind === 'owner-handoff' ? run.nodes.R : run.nodes.T);
}

describe(header, () => {
  it.each(schedules.map((s) => ({ s, name: describeSchedule(s) })))('$name', async ({ s }) => {
    const what = `${header}, schedule ${describeSchedule(s)}`;
    const [owner, R, F] = s.replicas;
    const run: Run = { s, nodes: { owner, R, F, T: s.targets[0]! }, fates: s.faults.map(() => 'planned'), pending: [], ended: false };
    const broker = cluster.client;
    await broker.createPartition({ id: s.partition, kind: 'queue', replicas: [...s.replicas] });
    const before = await settled(broker, s.partition);
    if (s.kind === 'replace') await broker.fault({ fault: 'crash-node', node: R });
    const progress = await broker.progress(s.partition);
    const bound = boundMs(s, progress.tail * progress.messageBytes, RATES);
    sent.set(s.partition, new Set());
    arm(run);
    const startedAt = Date.now();
    await start(run);
    const fail = async (why: string) => {
      const status = await client.workflow.getHandle(reconfigurationWorkflowId(s.partition)).query(statusQuery).then(
        (st) => `${st.phase}${st.blockingReason ? ` (${st.blockingReason})` : ''}`,
        (err: unknown) => `no status: ${(err as Error).message}`,
      );
      const p = await broker.partition(s.partition).then((v) => JSON.stringify(v.partition), () => 'unreadable');
      return `${what}: ${why}; fates ${JSON.stringify(run.fates)}; status ${status}; partition ${p}`;
    };
    const outcome = await endOf(run, bound, startedAt, fail);
    const tookMs = Date.now() - startedAt;
    run.ended = true;
    await within(Promise.all(run.pending), AFTERMATH_MS, () => fail(`its heals and restarts did not finish within ${AFTERMATH_MS} ms`));
    for (const n of (await broker.nodes()).nodes) if (!n.live) await broker.fault({ fault: 'restart-node', node: n.id });
    const after = await settled(broker, s.partition);

    const ending = outcome.status === 'aborted' ? `aborted:${outcome.code}` : outcome.status;
    console.log(`${describeSchedule(s)} -> ${ending} in ${tookMs} ms (bound ${bound} ms)`);
    coverage.schedules++;
    coverage.worstBoundUse = Math.max(coverage.worstBoundUse, tookMs / bound);
    bump(coverage.byKind, s.kind);
    bump(coverage.outcomes, ending);
    s.faults.forEach((f, i) => {
      // A fault at a write the operation never sent (it ended or went another way first) was not reached.
      const reached = 'write' in f.trigger ? sent.get(s.partition)!.has(f.trigger.write) : run.fates[i] !== 'unreached';
      if (run.fates[i] === 'planned' && !reached) run.fates[i] = 'unreached';
      bump(coverage.planned, f.kind);
      bump(run.fates[i] === 'fired' ? coverage.fired : coverage.unreached, f.kind);
    });
    armed.delete(s.partition);

    // Every fault fired whose write the operation sent, or whose time came while it ran.
    expect(run.fates, `${what}: a reached fault did not fire`).not.toContain('planned');
    expect(() => {
      expectOutcome(run, outcome);
      expectAssignment(run, before, after, outcome);
    }, `${what}: ended ${ending}, assignment before ${JSON.stringify(counted(before))} after ${JSON.stringify(after)}`).not.toThrow();
    expect((await broker.invariants()).breaches, what).toEqual([]);
    histories.push({ workflowId: reconfigurationWorkflowId(s.partition), history: await client.workflow.getHandle(reconfigurationWorkflowId(s.partition)).fetchHistory(), what });
    await broker.deletePartition(s.partition);
  }, 600_000);

  it('every produced history replays strictly under the current workflow code', async () => {
    expect(histories.length).toBe(COUNT);
    const failures: string[] = [];
    const results = Worker.runReplayHistories({ workflowsPath: WORKFLOWS_PATH }, histories.map(({ workflowId, history }) => ({ workflowId, history })));
    let replayed = 0;
    for await (const result of results) {
      replayed++;
      const run = histories.find((h) => h.workflowId === result.workflowId);
      if (result.error) failures.push(`${run?.what}: ${run ? withHistoryExcerpt(result.error, run.history).message : result.error.message}`);
    }
    expect(replayed).toBe(histories.length);
    expect(failures, header).toEqual([]);
  });

  // Schedule i runs kind i mod 5 and leads with fault kind i mod 7, one in 25 restarts Temporal: from 14 schedules
  // on, every kind and fault kind is planned at least twice, so a floor missed means the randomness stopped reaching it.
  it.skipIf(COUNT < 14)('covers every operation kind and fires every fault kind', () => {
    for (const k of KINDS) expect(coverage.byKind[k] ?? 0, `${header}: kind ${k}`).toBeGreaterThanOrEqual(1);
    for (const k of FAULT_KINDS) expect(coverage.fired[k] ?? 0, `${header}: fault ${k} fired`).toBeGreaterThanOrEqual(1);
    for (const status of ['completed', 'aborted', 'cancelled']) {
      expect(Object.keys(coverage.outcomes).some((o) => o.startsWith(status)), `${header}: an outcome ${status}`).toBe(true);
    }
  });
});
