/**
 * Restarts at each phase of the owner handoff, the replication-factor increase and the lost-follower
 * replacement, and in each stage of the owner move: the reference cluster killed with SIGKILL and restarted on its database, and the Temporal dev
 * server stopped and restarted on its database. Every case runs its operation on its own partition and holds it
 * in the named phase, by a control the cluster offers (a stalled transfer, a high publish rate) or by the worker
 * holding the phase's guarded write; once every case is held, one restart hits them all, each is checked to be
 * still in its phase, and the holds are released. Each case asserts the phase before and after the restart, the
 * final assignment, the outcome, zero invariant breaches and that its history replays strictly (the Temporal
 * restart's histories are kept as fixtures: test/fixtures/histories/temporal-restarted-*); the handoff also that no
 * confirmed publish was lost or duplicated across the restart and that admission is open at the end.
 * Partitions q-300..q-314, on a cluster of each kind of restart.
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGrow, startReplace } from '../../operations/grow';
import { startHandoff, startOwnerMove } from '../../operations/handoff';
import type { MovesContext } from '../../operations/moves';
import { ClusterClient } from '../../cluster/client';
import { writeRequirement, type GuardedWriteName, type Partition } from '../../cluster/contract';
import { reconfigurationWorkflowId, statusQuery, type MoveOutcome, type MovePhase } from '../../rules/definitions';
import { connectClient, counted, eventually, outcomeOf, replayAndKeep, replayStrictly, startTestCluster, startWorker } from './helpers';
import { restartableCluster, restartableTemporal, type Restartable } from './processes';
import { armFault, type Armed } from './write-faults';

/**
 * The tuning startTestCluster gives an in-process cluster, as flags of a cluster process; a sync budget wide
 * enough for every case's transfer to n5 at once.
 */
const CONFIG = { perNodeLimit: 16 };
const CLUSTER_FLAGS = {
  nodes: 8, partitions: 0, streams: 0, 'tick-ms': 50, 'initial-messages': 3_000, 'retain-messages': 1_000, 'message-bytes': 1_024,
  'publish-rate': 50, 'transfer-rate': 4 * 1024 * 1024, 'catch-up-slack': 50, 'recovery-delay-ms': 500, 'per-node-limit': CONFIG.perNodeLimit, 'cluster-limit': 32,
};
const TIMING = { pollMs: 500, retryMs: 300 };

type Kind = 'cluster' | 'temporal';

/** What the cases work with: the broker, the Temporal client of the moment, the worker's write holds by partition. */
interface Rig {
  kind: Kind;
  broker: ClusterClient;
  client: Client;
  ctx: MovesContext;
  armed: Map<string, Armed>;
  /** The process a restart stops and starts again on its data. */
  target: Restartable;
  restart(): Promise<void>;
}

/**
 * One rig per kind of restart: for `cluster` a cluster process and the file's namespace of the shared dev server;
 * for `temporal` a dev server of its own (namespace `default`) and an in-process cluster. A worker in this process.
 */
function useRig(kind: Kind, closeFirst: () => Promise<void>): Rig {
  const rig = { kind, armed: new Map() } as Rig;
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    let clusterUrl: string;
    let address: string | undefined;
    if (kind === 'cluster') {
      rig.target = await restartableCluster(CLUSTER_FLAGS);
      closers.push(() => rig.target.close());
      clusterUrl = rig.target.address;
    } else {
      rig.target = await restartableTemporal();
      closers.push(() => rig.target.close());
      address = rig.target.address;
      const cluster = await startTestCluster(CONFIG, { nodes: 8, partitions: 0, streams: 0 });
      closers.push(() => cluster.close());
      clusterUrl = cluster.url;
    }
    const taskQueue = `operation-restarts-${kind}-${process.pid}`;
    rig.broker = new ClusterClient(clusterUrl);
    rig.client = await connectClient(address);
    rig.ctx = { client: rig.client, cluster: rig.broker, taskQueue };
    // Each partition's write goes through the hold armed for it, if any.
    const { w, running } = await startWorker(clusterUrl, taskQueue, (real) => armFault(real, (id) => rig.armed.get(id) ?? null), address);
    closers.push(async () => {
      w.shutdown();
      await running;
    });
    rig.restart = async () => {
      await rig.target.restart();
      if (kind === 'cluster') return;
      await rig.client.connection.close();
      rig.client = await connectClient(address);
      rig.ctx = { ...rig.ctx, client: rig.client };
    };
  });
  afterAll(async () => {
    // A hold left by a failed case would keep its activity, and the worker's shutdown, waiting.
    await closeFirst();
    for (const close of closers.reverse()) await close();
  });
  return rig;
}

/** What keeps an operation in one phase until released. */
interface Hold {
  /** Set before the operation starts. */
  arm(): Promise<void>;
  /** Resolves once the hold has caught the operation (a held write was reached). */
  reached(): Promise<void>;
  release(): Promise<void>;
}

/**
 * The worker holds `write` on `id` just before sending it, or just after its reply came back, until released;
 * every try is held, so an activity the server times out and tries again while held stays in the phase.
 */
function heldWrite(rig: Rig, id: string, write: GuardedWriteName, when: 'before' | 'after'): Hold {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let at = false;
  const armed: Armed = {
    partition: id, write, when, faults: [], fired: false,
    hook: async () => {
      at = true;
      armed.fired = false;
      await released;
    },
  };
  return {
    arm: async () => void rig.armed.set(id, armed),
    reached: () => eventually(`${write} on ${id} held ${when} it is sent`, async () => at || undefined, 120_000).then(() => undefined),
    release: async () => {
      rig.armed.delete(id);
      release();
    },
  };
}

/** Replication to `node` stalled by the cluster's own fault control, which its database keeps across a restart. */
function stalled(rig: Rig, id: string, node: string): Hold {
  const set = async (on: boolean) => void (await rig.broker.fault({ fault: 'stall-transfer', partition: id, node, stalled: on }));
  return { arm: () => set(true), reached: async () => undefined, release: () => set(false) };
}

/**
 * Past the swap with T short of B: just before the swap is sent, T's replication stalls and the hold waits until
 * T is behind the confirmed tail (B is the confirmed tail at the swap), so the removal waits for T to cover B.
 */
function behindAtSwap(rig: Rig, id: string, node: string): Hold {
  const stall = stalled(rig, id, node);
  const hook = async () => {
    await stall.arm();
    await eventually(`${node} behind the confirmed tail of ${id}`, async () => {
      const p = await rig.broker.progress(id);
      return (p.replicas.find((r) => r.node === node)?.durableOffset ?? 0) < p.confirmedTail ? true : undefined;
    });
  };
  const armed: Armed = { partition: id, write: 'swap', when: 'before', faults: [], fired: false, hook };
  return {
    arm: async () => void rig.armed.set(id, armed),
    reached: () => eventually(`the swap of ${id} sent behind the tail`, async () => armed.fired || undefined, 120_000).then(() => undefined),
    release: async () => {
      rig.armed.delete(id);
      await stall.release();
    },
  };
}

async function phaseOf(rig: Rig, id: string): Promise<MovePhase> {
  // Queries fail while the dev server is down or the worker has not polled it again yet: keep asking.
  return eventually(`the status of ${id}`, async () => (await rig.client.workflow.getHandle(reconfigurationWorkflowId(id)).query(statusQuery)).phase, 120_000);
}

async function partition(rig: Rig, id: string): Promise<Partition> {
  return (await rig.broker.partition(id)).partition;
}

/** A new queue partition, once it serves. */
async function create(rig: Rig, id: string, replicas: string[]): Promise<Partition> {
  await rig.broker.createPartition({ id, kind: 'queue', replicas });
  return eventually(`${id} serving`, async () => {
    const p = await partition(rig, id);
    return p.pendingRecovery === null ? p : undefined;
  });
}

/**
 * Publishes through the cluster's test control all along (3 messages at a time): each reply names the offsets the
 * messages got. A publish the cluster did not answer (it was down) is no confirmed publish and is not kept.
 */
function publisher(broker: ClusterClient, id: string) {
  const published: { firstOffset: number; nextOffset: number; at: number }[] = [];
  const samples: { tail: number; confirmedTail: number }[] = [];
  const state = { stop: false, paused: false };
  const loop = (async () => {
    while (!state.stop) {
      if (!state.paused) {
        try {
          published.push({ ...(await broker.publish(id, 3)), at: Date.now() });
          const { tail, confirmedTail } = await broker.progress(id);
          samples.push({ tail, confirmedTail });
        } catch {
          // The cluster is down: no reply, nothing confirmed.
        }
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    published,
    samples,
    state,
    async stop() {
      state.stop = true;
      await loop;
    },
  };
}
type Publisher = ReturnType<typeof publisher>;

/** Held at the quiet point: 400 messages/s and at most 0 in flight; released when publishing stops for a moment. */
function busy(rig: Rig, id: string, pub: Publisher): Hold {
  return {
    arm: async () => void (await rig.broker.setRate(id, 400)),
    reached: async () => undefined,
    release: async () => {
      pub.state.paused = true;
      await rig.broker.setRate(id, 0);
      await eventually('a quiet point', async () => ((await phaseOf(rig, id)) !== 'waiting_for_quiet_point' ? true : undefined));
      await rig.broker.setRate(id, 50);
      pub.state.paused = false;
    },
  };
}

/** Every publish answered, before and after the restart, got its own offsets, and every one is confirmed and on `owner`. */
async function noneLostOrDuplicated(rig: Rig, id: string, pub: Publisher, owner: string, restartedAt: number): Promise<void> {
  const sorted = [...pub.published].sort((a, b) => a.firstOffset - b.firstOffset);
  expect(sorted.some((p) => p.at < restartedAt) && sorted.some((p) => p.at > restartedAt)).toBe(true);
  for (let i = 1; i < sorted.length; i++) expect(sorted[i]!.firstOffset).toBeGreaterThanOrEqual(sorted[i - 1]!.nextOffset);
  for (let i = 1; i < pub.samples.length; i++) {
    expect(pub.samples[i]!.tail).toBeGreaterThanOrEqual(pub.samples[i - 1]!.tail);
    expect(pub.samples[i]!.confirmedTail).toBeGreaterThanOrEqual(pub.samples[i - 1]!.confirmedTail);
  }
  const last = sorted.at(-1)!.nextOffset;
  const settled = await eventually('every publish confirmed', async () => {
    const p = await rig.broker.progress(id);
    return p.confirmedTail >= last ? p : undefined;
  });
  expect(settled.replicas.find((r) => r.node === owner)!.durableOffset).toBeGreaterThanOrEqual(last);
}


/**
 * A handoff from n3 to n6 (n7 the other counted copy), an increase onto n5, a replacement of the lost n8 by n5,
 * an owner move from n3 onto n2 via the copy of n6.
 */
const [A, D, F] = ['n3', 'n6', 'n7'];
const LOST = 'n8';
const T = 'n5';
const [OWNER_TO, VIA] = ['n2', 'n6'];

interface Case {
  op: 'owner handoff' | 'increase' | 'replacement' | 'owner move';
  phase: MovePhase;
  id: string;
  replicas: string[];
  hold(rig: Rig, id: string, pub: Publisher | null): Hold;
  start(ctx: MovesContext, id: string): Promise<unknown>;
  /** The final assignment and the outcome. */
  check(rig: Rig, before: Partition, outcome: MoveOutcome): Promise<void>;
}

const handoff = (phase: MovePhase, hold: Case['hold']): Omit<Case, 'id'> => ({
  op: 'owner handoff',
  phase,
  replicas: [A, D, F],
  hold,
  start: (ctx, id) => {
    // Quiet at most 0 in flight (never while busy) for the quiet-point case; elsewhere close within a second. The
    // bounds outlast the wait until every case is held: a bound that ran out would move the case on unreleased.
    const quiet = phase === 'waiting_for_quiet_point' ? { maxInFlight: 0, maxWaitMs: 600_000 } : { maxWaitMs: 1_000 };
    return startHandoff(ctx, { partition: id, from: A, to: D, origin: 'operator', timing: TIMING, quietPoint: { ...quiet, maxClosedMs: 600_000 } });
  },
  check: async (rig, before, outcome) => {
    expect(outcome).toMatchObject({ status: 'completed', kind: 'owner-handoff', partition: before.id, from: A, to: D, epoch: before.epoch + 1 });
    const after = await partition(rig, before.id);
    expect(after).toMatchObject({ owner: D, admission: 'open', epoch: before.epoch + 1, replicationFactor: before.replicationFactor, writeRequirement: before.writeRequirement });
    expect(counted(after)).toEqual(counted(before));
  },
});

const increase = (phase: MovePhase, hold: Case['hold']): Omit<Case, 'id'> => ({
  op: 'increase',
  phase,
  replicas: ['n1', 'n4', 'n2'],
  hold,
  start: (ctx, id) => startGrow(ctx, { partition: id, to: T, origin: 'operator', timing: TIMING }),
  check: async (rig, before, outcome) => {
    expect(outcome).toMatchObject({ status: 'completed', kind: 'grow', partition: before.id, from: null, to: T });
    const after = await partition(rig, before.id);
    expect(counted(after)).toEqual([...counted(before), T].sort());
    const rf = before.replicationFactor + 1;
    expect(after).toMatchObject({ replicationFactor: rf, writeRequirement: writeRequirement(after.durability, rf), learners: [], leaving: null });
  },
});

const replacement = (phase: MovePhase, hold: Case['hold']): Omit<Case, 'id'> => ({
  op: 'replacement',
  phase,
  replicas: ['n1', 'n4', LOST],
  hold,
  start: (ctx, id) => startReplace(ctx, { partition: id, lost: LOST, with: T, origin: 'operator', timing: TIMING }),
  check: async (rig, before, outcome) => {
    expect(outcome).toMatchObject({ status: 'completed', kind: 'replace', partition: before.id, from: LOST, to: T, boundary: expect.any(Number) });
    const after = await partition(rig, before.id);
    expect(counted(after)).toEqual(counted(before).map((x) => (x === LOST ? T : x)).sort());
    expect(after.history.map((h) => h.node)).not.toContain(LOST);
    expect(after).toMatchObject({ replicationFactor: before.replicationFactor, writeRequirement: before.writeRequirement, learners: [], leaving: null });
  },
});

const ownerMove = (phase: MovePhase, hold: Case['hold']): Omit<Case, 'id'> => ({
  op: 'owner move',
  phase,
  replicas: [A, VIA, F],
  hold,
  start: (ctx, id) =>
    startOwnerMove(ctx, { partition: id, from: A, to: OWNER_TO, via: VIA, origin: 'operator', timing: TIMING, quietPoint: { maxWaitMs: 1_000, maxClosedMs: 600_000 } }),
  check: async (rig, before, outcome) => {
    expect(outcome).toMatchObject({ status: 'completed', kind: 'owner-move', partition: before.id, from: A, to: OWNER_TO, epoch: before.epoch + 1 });
    const after = await partition(rig, before.id);
    expect(after).toMatchObject({ owner: OWNER_TO, admission: 'open', epoch: before.epoch + 1, replicationFactor: before.replicationFactor, writeRequirement: before.writeRequirement });
    expect(counted(after)).toEqual(counted(before).map((x) => (x === VIA ? OWNER_TO : x)).sort());
    expect(after.history.map((h) => h.node)).not.toContain(VIA);
  },
});

const CASES: Case[] = [
  handoff('waiting_for_quiet_point', (rig, id, pub) => busy(rig, id, pub!)),
  handoff('closing_admission', (rig, id) => heldWrite(rig, id, 'close-admission', 'before')),
  handoff('waiting_for_final_boundary', (rig, id) => stalled(rig, id, F)),
  handoff('committing_owner', (rig, id) => heldWrite(rig, id, 'commit-owner', 'after')),
  handoff('reopening_admission', (rig, id) => heldWrite(rig, id, 'reopen-admission', 'before')),
  increase('adding_learner', (rig, id) => heldWrite(rig, id, 'add-learner', 'before')),
  increase('catching_up', (rig, id) => stalled(rig, id, T)),
  increase('promoting', (rig, id) => heldWrite(rig, id, 'promote-learner', 'after')),
  replacement('catching_up', (rig, id) => stalled(rig, id, T)),
  replacement('swapping', (rig, id) => heldWrite(rig, id, 'swap', 'after')),
  replacement('covering_boundary', (rig, id) => behindAtSwap(rig, id, T)),
  replacement('removing', (rig, id) => heldWrite(rig, id, 'remove-leaving', 'before')),
  // The follower-move stage, then the handoff stage (F stalled all along: the follower move does not wait for it).
  ownerMove('catching_up', (rig, id) => stalled(rig, id, OWNER_TO)),
  ownerMove('waiting_for_final_boundary', (rig, id) => stalled(rig, id, F)),
  ownerMove('committing_owner', (rig, id) => heldWrite(rig, id, 'commit-owner', 'after')),
].map((c, i) => ({ ...c, id: `q-${300 + i}` }));

/** What one case saw: its partition before, the phase just before and just after the restart, how it ended. */
interface Seen {
  before: Partition;
  pub: Publisher | null;
  atRestart: MovePhase | string;
  afterRestart: MovePhase | string;
  outcome: Promise<MoveOutcome>;
}

describe.each<{ kind: Kind; what: string }>([
  { kind: 'cluster', what: 'the reference cluster killed with SIGKILL and restarted on its database' },
  { kind: 'temporal', what: 'the Temporal dev server restarted on its database' },
])('$what while every operation is held in one of its phases', ({ kind }) => {
  const seen = new Map<string, Seen>();
  const holds: Hold[] = [];
  let restartedAt = 0;
  const releaseAll = async () => void (await Promise.allSettled(holds.splice(0).map((h) => h.release())));
  const rig = useRig(kind, async () => {
    await releaseAll();
    for (const s of seen.values()) await s.pub?.stop();
  });

  beforeAll(async () => {
    const befores = new Map<string, Partition>();
    for (const c of CASES) befores.set(c.id, await create(rig, c.id, c.replicas));
    await rig.broker.fault({ fault: 'crash-node', node: LOST });
    const started = CASES.map((c) => {
      const pub = c.op === 'owner handoff' ? publisher(rig.broker, c.id) : null;
      const hold = c.hold(rig, c.id, pub);
      holds.push(hold);
      const s: Seen = { before: befores.get(c.id)!, pub, atRestart: 'not held', afterRestart: 'not held', outcome: Promise.resolve(null as never) };
      seen.set(c.id, s);
      return { c, s, hold };
    });
    // Each case is caught in its phase, or says why not; the restart comes once all are (or could not be).
    await Promise.all(
      started.map(async ({ c, s, hold }) => {
        try {
          if (s.pub) await eventually('publishing', async () => (s.pub!.published.length >= 3 ? true : undefined));
          await hold.arm();
          await c.start(rig.ctx, c.id);
          await hold.reached();
          s.atRestart = await eventually(`${c.id} in ${c.phase}`, async () => ((await phaseOf(rig, c.id)) === c.phase ? c.phase : undefined), 120_000);
        } catch (err) {
          s.atRestart = `not held: ${(err as Error).message}`;
        }
      }),
    );
    const restarts = rig.target.restarts;
    await rig.restart();
    restartedAt = Date.now();
    expect(rig.target.restarts).toBe(restarts + 1);
    for (const { c, s } of started) s.afterRestart = await phaseOf(rig, c.id).catch((err: unknown) => `unknown: ${(err as Error).message}`);
    await releaseAll();
    for (const { c, s } of started) {
      s.outcome = outcomeOf(rig.client.workflow.getHandle(reconfigurationWorkflowId(c.id)));
      s.outcome.catch(() => undefined);
    }
  }, 400_000);

  it.each(CASES)('$op in $phase: restarted there, then completes', async (c) => {
    const s = seen.get(c.id)!;
    // Held in the named phase before the restart and still there after it: the restart happened in that phase.
    expect([s.atRestart, s.afterRestart]).toEqual([c.phase, c.phase]);
    const outcome = await s.outcome;
    await c.check(rig, s.before, outcome);
    if (s.pub) {
      await new Promise((r) => setTimeout(r, 300));
      await s.pub.stop();
      await noneLostOrDuplicated(rig, c.id, s.pub, D, restartedAt);
    }
    expect((await rig.broker.invariants()).breaches).toEqual([]);
    // Strict after either restart. The Temporal restart's histories are the ones kept as fixtures (one per
    // operation and phase held): queried all along, they are where a read's result came a task late.
    const name = `${kind}-restarted-${c.op.replace(' ', '-')}-${c.phase}`;
    if (kind === 'temporal') await replayAndKeep(rig.client, reconfigurationWorkflowId(c.id), name);
    else await replayStrictly(rig.client, reconfigurationWorkflowId(c.id), name);
  });
});
