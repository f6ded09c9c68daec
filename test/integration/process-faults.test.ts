/**
 * Process faults during a follower move: the worker killed with SIGKILL and restarted, the reference
 * cluster killed with SIGKILL and restarted on its database, the Temporal dev server restarted on its
 * database. Each move completes with zero breaches, and its history replays under the current code.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { startFollowerMove } from '../../operations/moves';
import { ClusterClient } from '../../cluster/client';
import { statusQuery, type MovePhase } from '../../rules/definitions';
import type { followerMoveV3 } from '../../workflows/follower-move';
import { connectClient, eventually, pickMove, replayAndKeep, startTestCluster, startWorker, temporalEnv } from './helpers';
import { restartableCluster, restartableTemporal, spawnWorker, tmpDir } from './processes';

/** Slow enough transfers that the move spends seconds catching up: room to kill things mid-move. */
const SLOW = { initialMessages: 8_000, retainMessages: 2_000, transferBytesPerSec: 2_000_000 };
const SLOW_FLAGS = { nodes: 6, partitions: 43, streams: 0, 'tick-ms': 50, 'initial-messages': 8000, 'retain-messages': 2000, 'transfer-rate': 2_000_000, 'publish-rate': 50, 'catch-up-slack': 50, 'recovery-delay-ms': 500 };
const PAST_SWAP: MovePhase[] = ['swapping', 'covering_boundary', 'removing', 'completed'];
/** Past the swap (B recorded) and not yet ended. */
const AFTER_SWAP: MovePhase[] = ['covering_boundary', 'removing'];

async function phaseOf(handle: WorkflowHandle<typeof followerMoveV3>): Promise<MovePhase | undefined> {
  return handle.query(statusQuery).then((s) => s.phase, () => undefined);
}

/** The identity (`pid@host`) of the worker that ran the move's last workflow task: the one that ended it. */
async function endedBy(client: Client, workflowId: string): Promise<string> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const started = (history.events ?? []).filter((e) => e.workflowTaskStartedEventAttributes).at(-1);
  return started?.workflowTaskStartedEventAttributes?.identity ?? '';
}

/** Wait until the move is in one of `phases` (status queries fail while no worker runs: keep asking). */
function inPhase(handle: WorkflowHandle<typeof followerMoveV3>, phases: MovePhase[], timeoutMs = 120_000): Promise<MovePhase> {
  return eventually(`phase ${phases.join('/')}`, async () => {
    const p = await phaseOf(handle);
    return p && phases.includes(p) ? p : undefined;
  }, timeoutMs);
}

describe('process faults during a follower move', () => {
  it('the worker is killed with SIGKILL while catching up and after the swap, and restarted', async () => {
    // A swap is accepted however far T is behind the tail (a large catch-up slack): see the stall below.
    const cluster = await startTestCluster({ ...SLOW, catchUpSlack: 1_000_000 }, { nodes: 6, partitions: 43, streams: 0 });
    const taskQueue = `kill-worker-${process.pid}`;
    const env = { ...temporalEnv(), TEMPORAL_TASK_QUEUE: taskQueue, CLUSTER_URL: cluster.url, DATA_DIR: tmpDir('worker') };
    const client = await connectClient();
    let worker = await spawnWorker(env);
    try {
      // The time between the swap and the end is short: a kill that comes too late tests nothing, so the
      // scene runs again on another partition rather than passing.
      for (const [attempt, id] of ['q-40', 'q-41', 'q-42'].entries()) {
        const { from, to } = await pickMove(cluster.client, id);
        const handle = await startFollowerMove({ client, cluster: cluster.client, taskQueue }, { partition: id, from, to, origin: 'operator', timing: { pollMs: 2_000 } });
        await inPhase(handle, ['catching_up']);
        await worker.kill9();
        worker = await spawnWorker(env);
        // From here the move hears from the broker only through its 2 s poll, so it stays past the swap (until
        // a poll says T covers B) long enough for the kill to land there.
        await cluster.client.fault({ fault: 'drop-events', count: 1_000_000 });
        // When T covers B at the swap, the removal rides in the swap's activity and nothing is left to kill in:
        // T stops replicating once admitted, so B (the confirmed tail at the swap) is ahead of it and the move
        // waits past the swap until T resumes.
        await eventually('T admitted', async () => ((await cluster.client.partition(id)).partition.history.some((h) => h.node === to) ? true : undefined));
        await cluster.client.fault({ fault: 'stall-transfer', partition: id, node: to, stalled: true });
        await inPhase(handle, [...AFTER_SWAP, 'completed']);
        const landed = await phaseOf(handle);
        const inWindow = landed !== undefined && AFTER_SWAP.includes(landed);
        const killed = worker.process.pid;
        if (inWindow) {
          await worker.kill9();
          worker = await spawnWorker(env);
        }
        await cluster.client.fault({ fault: 'stall-transfer', partition: id, node: to, stalled: false });
        await cluster.client.fault({ fault: 'drop-events', count: 0 });
        expect(await handle.result()).toMatchObject({ status: 'completed', from, to });
        // The kill landed before the end exactly when the workflow task that ended the move ran elsewhere.
        if (!inWindow || (await endedBy(client, handle.workflowId)).startsWith(`${killed}@`)) continue;
        console.log(`worker killed after the swap in phase ${landed}, attempt ${attempt + 1}`);
        expect((await cluster.client.invariants()).breaches).toEqual([]);
        await replayAndKeep(client, handle.workflowId, 'v3-worker-killed');
        return;
      }
      throw new Error('in every attempt the move ended before the worker was killed after the swap');
    } finally {
      await worker.stop();
      await cluster.close();
    }
  });

  it('the reference cluster is killed with SIGKILL mid-move and restarted on its database', async () => {
    const broker = await restartableCluster(SLOW_FLAGS);
    const url = broker.address;
    const cluster = new ClusterClient(url);
    const taskQueue = `kill-cluster-${process.pid}`;
    const client = await connectClient();
    const { w, running } = await startWorker(url, taskQueue);
    try {
      const { from, to } = await pickMove(cluster, 'q-41');
      const handle = await startFollowerMove({ client, cluster, taskQueue }, { partition: 'q-41', from, to, origin: 'operator' });
      await inPhase(handle, ['catching_up']);
      await broker.restart(1_000);
      await inPhase(handle, PAST_SWAP);
      await broker.restart();
      expect(await handle.result()).toMatchObject({ status: 'completed', from, to });
      const p = (await cluster.partition('q-41')).partition;
      expect(p.followers).toContain(to);
      expect(p.history.map((h) => h.node)).not.toContain(from);
      expect((await cluster.invariants()).breaches).toEqual([]);
      await replayAndKeep(client, handle.workflowId, 'v3-cluster-killed');
    } finally {
      w.shutdown();
      await running;
      await broker.close();
    }
  });

  it('the Temporal dev server is restarted on its database mid-move', async () => {
    const server = await restartableTemporal();
    const cluster = await startTestCluster(SLOW, { nodes: 6, partitions: 43, streams: 0 });
    const taskQueue = `restart-temporal-${process.pid}`;
    let client: Client = await connectClient(server.address);
    const { w, running } = await startWorker(cluster.url, taskQueue, undefined, server.address);
    try {
      const { from, to } = await pickMove(cluster.client, 'q-42');
      const handle = await startFollowerMove({ client, cluster: cluster.client, taskQueue }, { partition: 'q-42', from, to, origin: 'operator' });
      await inPhase(handle, ['catching_up']);
      await server.restart(1_000);
      client = await connectClient(server.address);
      const again = client.workflow.getHandle<typeof followerMoveV3>(handle.workflowId);
      expect(await again.result()).toMatchObject({ status: 'completed', from, to });
      expect((await cluster.client.invariants()).breaches).toEqual([]);
      await replayAndKeep(client, handle.workflowId, 'v3-temporal-restarted');
    } finally {
      w.shutdown();
      await running;
      await server.close();
      await cluster.close();
    }
  });
});
