/**
 * Restarts at each phase of the owner handoff, the replication-factor increase and the lost-follower
 * replacement: the reference cluster killed with SIGKILL and restarted on its database, and the Temporal dev
 * server stopped and restarted on its database. The operation is held in the named phase by a control the
 * cluster offers (a stalled transfer, a high publish rate) or by the worker holding the phase's guarded write;
 * each case checks the phase before and after the restart, then the final assignment, the outcome, zero
 * invariant breaches and that the history replays. The handoff also checks that no confirmed publish was lost
 * or duplicated across the restart and that admission is open at the end. One cluster and one worker per kind
 * of restart; partitions q-300..q-319.
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGrow, startReplace } from '../../client/grow';
import { startHandoff } from '../../client/handoff';
import type { MovesContext } from '../../client/moves';
import { ClusterClient } from '../../cluster/client';
import { writeRequirement, type GuardedWriteName, type Partition } from '../../cluster/contract';
import { reconfigurationWorkflowId, statusQuery, type MoveOutcome, type MovePhase } from '../../workflows/definitions';
import { connectClient, eventually, outcomeOf, replayAndKeep, startTestCluster, startWorker } from './helpers';
import { restartableCluster, restartableTemporal, type Restartable } from './processes';
import { armFault, type Armed } from './write-faults';

/** The tuning startTestCluster gives an in-process cluster, as flags of a cluster process. */
const CLUSTER_FLAGS = {
  nodes: 8, partitions: 0, streams: 0, 'tick-ms': 50, 'initial-messages': 3_000, 'retain-messages': 1_000, 'message-bytes': 1_024,
  'publish-rate': 50, 'transfer-rate': 4 * 1024 * 1024, 'catch-up-slack': 50, 'recovery-delay-ms': 500, 'per-node-limit': 4, 'cluster-limit': 32,
};
const TIMING = { pollMs: 500, retryMs: 300 };

/** What a case works with: the broker, the Temporal client of the moment, the write hold of the worker. */
interface Rig {
  kind: 'cluster' | 'temporal';
  broker: ClusterClient;
  client: Client;
  ctx: MovesContext;
  armed: { current: Armed | null };
  /** The process a restart stops and starts again on its data. */
  target: Restartable;
  restart(): Promise<void>;
}

/**
 * One rig per kind of restart, shared by its cases: for `cluster` a cluster process on the file's namespace of the
 * shared dev server; for `temporal` a dev server of its own (namespace `default`) and an in-process cluster.
 */
function useRig(kind: 'cluster' | 'temporal'): Rig {
  const rig = { kind, armed: { current: null } } as Rig;
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
      const cluster = await startTestCluster({}, { nodes: 8, partitions: 0, streams: 0 });
      closers.push(() => cluster.close());
      clusterUrl = cluster.url;
    }
    const taskQueue = `operation-restarts-${kind}-${process.pid}`;
    rig.broker = new ClusterClient(clusterUrl);
    rig.client = await connectClient(address);
    rig.ctx = { client: rig.client, cluster: rig.broker, taskQueue };
    const { w, running } = await startWorker(clusterUrl, taskQueue, (real) => armFault(real, () => rig.armed.current), address);
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

/** The worker holds `write` on `id` just before sending it, or just after its reply came back, until released. */
function heldWrite(rig: Rig, id: string, write: GuardedWriteName, when: 'before' | 'after'): Hold {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let at = false;
  const hook = async () => {
    at = true;
    await released;
  };
  return {
    arm: async () => void (rig.armed.current = { partition: id, write, when, faults: [], fired: false, hook }),
    reached: () => eventually(`${write} on ${id} held ${when} it is sent`, async () => at || undefined).then(() => undefined),
    release: async () => {
      release();
      rig.armed.current = null;
    },
  };
}

/** Replication to `node` stalled by the cluster's own fault control, which its database keeps across a restart. */
function stalled(rig: Rig, id: string, node: string): Hold {
  const set = async (on: boolean) => void (await rig.broker.fault({ fault: 'stall-transfer', partition: id, node, stalled: on }));
  return { arm: () => set(true), reached: async () => undefined, release: () => set(false) };
}

/**
 * Past the swap with T short of B: just before the swap is sent, T's replication stalls and the test waits until
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
    arm: async () => void (rig.armed.current = armed),
    reached: () => eventually('the swap sent behind the tail', async () => (armed.fired || undefined)).then(() => undefined),
    release: async () => {
      rig.armed.current = null;
      await stall.release();
    },
  };
}

async function phaseOf(rig: Rig, id: string): Promise<MovePhase> {
  // Queries fail while the dev server is down or the worker has not polled it again yet: keep asking.
  return eventually(`the status of ${id}`, async () => (await rig.client.workflow.getHandle(reconfigurationWorkflowId(id)).query(statusQuery)).phase, 120_000);
}

/**
 * Start the operation, wait until the hold keeps it in `phase`, restart, check it is still there, release; how
 * it ended and when the restart was over.
 */
async function throughRestart(rig: Rig, id: string, phase: MovePhase, hold: Hold, start: () => Promise<unknown>): Promise<{ outcome: MoveOutcome; restartedAt: number }> {
  await hold.arm();
  await start();
  await hold.reached();
  await eventually(`${id} in ${phase}`, async () => ((await phaseOf(rig, id)) === phase ? true : undefined), 120_000);
  const restarts = rig.target.restarts;
  await rig.restart();
  const restartedAt = Date.now();
  expect(rig.target.restarts).toBe(restarts + 1);
  // Still there after the restart: the restart happened in the named phase.
  expect(await phaseOf(rig, id)).toBe(phase);
  await hold.release();
  const outcome = await outcomeOf(rig.client.workflow.getHandle(reconfigurationWorkflowId(id)));
  await replayAndKeep(rig.client, reconfigurationWorkflowId(id), `${rig.kind}-restarted-${id}-${phase}`);
  expect((await rig.broker.invariants()).breaches).toEqual([]);
  return { outcome, restartedAt };
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
 * messages got. A publish the restarted cluster did not answer is no confirmed publish and is not kept.
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
      await new Promise((r) => setTimeout(r, 20));
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

/** Held at the quiet point: 400 messages/s and at most 0 in flight; released when publishing stops. */
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

const counted = (p: Partition) => [p.owner, ...p.followers].sort();

type Case<P> = { phase: MovePhase; n: number } & P;
function numbered<P>(base: number, cases: ({ phase: MovePhase } & P)[]): Case<P>[] {
  return cases.map((c, i) => ({ ...c, n: base + i }));
}

/** A at n3 hands to D at n6; F at n7 is the other counted copy. */
const [A, D, F] = ['n3', 'n6', 'n7'];
const HANDOFF = numbered<{ hold: (rig: Rig, id: string, pub: Publisher) => Hold }>(300, [
  { phase: 'waiting_for_quiet_point', hold: busy },
  { phase: 'closing_admission', hold: (rig, id) => heldWrite(rig, id, 'close-admission', 'before') },
  { phase: 'waiting_for_final_boundary', hold: (rig, id) => stalled(rig, id, F) },
  { phase: 'committing_owner', hold: (rig, id) => heldWrite(rig, id, 'commit-owner', 'after') },
  { phase: 'reopening_admission', hold: (rig, id) => heldWrite(rig, id, 'reopen-admission', 'before') },
]);

/** An increase of a partition on n1, n4, n2 onto n5. */
const GROW = numbered<{ hold: (rig: Rig, id: string) => Hold }>(305, [
  { phase: 'adding_learner', hold: (rig, id) => heldWrite(rig, id, 'add-learner', 'before') },
  { phase: 'catching_up', hold: (rig, id) => stalled(rig, id, 'n5') },
  { phase: 'promoting', hold: (rig, id) => heldWrite(rig, id, 'promote-learner', 'after') },
]);

/** A replacement of the lost n8 of a partition on n1, n4, n8 by n5. */
const REPLACE = numbered<{ hold: (rig: Rig, id: string) => Hold }>(308, [
  { phase: 'catching_up', hold: (rig, id) => stalled(rig, id, 'n5') },
  { phase: 'swapping', hold: (rig, id) => heldWrite(rig, id, 'swap', 'after') },
  { phase: 'covering_boundary', hold: (rig, id) => behindAtSwap(rig, id, 'n5') },
  { phase: 'removing', hold: (rig, id) => heldWrite(rig, id, 'remove-leaving', 'before') },
]);

describe.each([
  { kind: 'cluster' as const, what: 'the reference cluster killed with SIGKILL and restarted on its database' },
  { kind: 'temporal' as const, what: 'the Temporal dev server restarted on its database' },
])('$what', ({ kind }) => {
  const rig = useRig(kind);

  describe('owner handoff', () => {
    it.each(HANDOFF)('in $phase: D owns it at epoch + 1, admission open, no publish lost or duplicated', async ({ phase, hold, n }) => {
      const id = `q-${n}`;
      const before = await create(rig, id, [A, D, F]);
      const pub = publisher(rig.broker, id);
      try {
        await eventually('publishing', async () => (pub.published.length >= 5 ? true : undefined));
        const quiet = phase === 'waiting_for_quiet_point' ? { maxInFlight: 0, maxWaitMs: 120_000 } : { maxWaitMs: 1_000 };
        const { outcome, restartedAt } = await throughRestart(rig, id, phase, hold(rig, id, pub), () =>
          startHandoff(rig.ctx, { partition: id, from: A, to: D, origin: 'operator', timing: TIMING, quietPoint: { ...quiet, maxClosedMs: 120_000 } }),
        );
        expect(outcome).toMatchObject({ status: 'completed', kind: 'owner-handoff', partition: id, from: A, to: D, epoch: before.epoch + 1 });
        await new Promise((r) => setTimeout(r, 300));
        await pub.stop();
        const after = await partition(rig, id);
        expect(after).toMatchObject({ owner: D, admission: 'open', epoch: before.epoch + 1, replicationFactor: before.replicationFactor, writeRequirement: before.writeRequirement });
        expect(counted(after)).toEqual(counted(before));
        await noneLostOrDuplicated(rig, id, pub, D, restartedAt);
      } finally {
        await pub.stop();
      }
    });
  });

  describe('replication-factor increase', () => {
    it.each(GROW)('in $phase: n5 counts, the factor and W rise together', async ({ phase, hold, n }) => {
      const id = `q-${n}`;
      const before = await create(rig, id, ['n1', 'n4', 'n2']);
      const { outcome } = await throughRestart(rig, id, phase, hold(rig, id), () => startGrow(rig.ctx, { partition: id, to: 'n5', origin: 'operator', timing: TIMING }));
      expect(outcome).toMatchObject({ status: 'completed', kind: 'grow', partition: id, from: null, to: 'n5' });
      const after = await partition(rig, id);
      expect(counted(after)).toEqual([...counted(before), 'n5'].sort());
      expect(after).toMatchObject({ replicationFactor: before.replicationFactor + 1, writeRequirement: writeRequirement(after.durability, before.replicationFactor + 1), learners: [], leaving: null });
    });
  });

  describe('lost-follower replacement', () => {
    it.each(REPLACE)('in $phase: n5 counts in the lost n8 place, the factor and W unchanged', async ({ phase, hold, n }) => {
      const id = `q-${n}`;
      if (!(await rig.broker.nodes()).nodes.find((x) => x.id === 'n8')!.live) await rig.broker.fault({ fault: 'restart-node', node: 'n8' });
      const before = await create(rig, id, ['n1', 'n4', 'n8']);
      await rig.broker.fault({ fault: 'crash-node', node: 'n8' });
      const { outcome } = await throughRestart(rig, id, phase, hold(rig, id), () =>
        startReplace(rig.ctx, { partition: id, lost: 'n8', with: 'n5', origin: 'operator', timing: TIMING }),
      );
      expect(outcome).toMatchObject({ status: 'completed', kind: 'replace', partition: id, from: 'n8', to: 'n5', boundary: expect.any(Number) });
      const after = await partition(rig, id);
      expect(counted(after)).toEqual(counted(before).map((x) => (x === 'n8' ? 'n5' : x)).sort());
      expect(after.history.map((h) => h.node)).not.toContain('n8');
      expect(after).toMatchObject({ replicationFactor: before.replicationFactor, writeRequirement: before.writeRequirement, learners: [], leaving: null });
    });
  });
});
