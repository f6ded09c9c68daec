/**
 * The Temporal plumbing on a real dev server, with a fake broker injected through the activity factories: the
 * workflows bundle, run to completion, keep their search attributes and answer their status query, and the
 * progress relay carries its cursor across runs and histories.
 */
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, defaultPayloadConverter } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities';
import { createRelayActivities } from '../../activities/relay';
import type { ClusterEvent, Node, PartitionView } from '../../cluster/contract';
import { cancelUpdate, reconfigurationWorkflowId, statusQuery, WORKFLOW_TYPE } from '../../rules/definitions';
import type { progressRelay } from '../../workflows/relay';
import { KindKey, PhaseKey } from '../../rules/search-attributes';
import { WORKFLOWS_PATH } from '../../worker/worker';
import { connectClient, eventually, outcomeOf, replayAndKeep, temporalAddress, temporalNamespace } from './helpers';

const stream: PartitionView = {
  partition: {
    id: 's-0', kind: 'stream', owner: 'n1', followers: ['n2', 'n3'], learners: [], leaving: null, epoch: 1, generation: 3,
    replicationFactor: 3, durability: { mode: 'replica_durable', n: 3 }, writeRequirement: 3, history: [],
    pendingRecovery: null, admission: 'open', boundary: null, retainedCopies: [], historyBytes: 1000, publishRate: 0, deliveryRate: 0,
  },
  progress: { partition: 's-0', generation: 3, epoch: 1, now: 0, tail: 10, confirmedTail: 10, logStart: 0, messageBytes: 100, boundary: null, replicas: [] },
};
const nodes: Node[] = ['n1', 'n2', 'n3', 'n4'].map((id) => ({
  id, processId: `${id}-1`, storageInstance: `${id}-s`, live: true, downSince: null, capacity: 1, zone: 'z', publishRate: 0, deliveryRate: 0, draining: false,
}));

describe('workflow plumbing on a real Temporal dev server', () => {
  let worker: Worker;
  let running: Promise<void>;
  const writes: string[] = [];
  const taskQueue = `plumbing-${process.pid}`;

  beforeAll(async () => {
    const connection = await NativeConnection.connect({ address: temporalAddress() });
    worker = await Worker.create({
      connection,
      namespace: temporalNamespace(),
      taskQueue,
      workflowsPath: WORKFLOWS_PATH,
      activities: createActivities({
        cluster: {
          partition: async () => stream,
          nodes: async () => ({ generation: 1, now: 0, nodes }),
          write: async (_p, write) => {
            writes.push(write);
            throw new Error('no write may happen');
          },
        },
      }),
    });
    running = worker.run();
  });
  afterAll(async () => {
    worker.shutdown();
    await running;
  });

  it('refuses to move a stream partition without writing, says why, and ends Failed typed by the code', async () => {
    const client = await connectClient();
    const handle = await client.workflow.start(WORKFLOW_TYPE['follower-move'], {
      taskQueue,
      workflowId: `plumbing-${Date.now()}`,
      args: [{ partition: 's-0', from: 'n2', to: 'n4', origin: 'operator' }],
      typedSearchAttributes: [{ key: PhaseKey, value: 'validating' }, { key: KindKey, value: 'follower-move' }],
    });
    const err = await handle.result().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect((cause as ApplicationFailure).type).toBe('not_a_queue');
    expect((cause as ApplicationFailure).nonRetryable).toBe(true);
    expect(await outcomeOf(handle)).toMatchObject({ status: 'aborted', kind: 'follower-move', code: 'not_a_queue' });
    expect(writes).toEqual([]);
    const status = await handle.query(statusQuery);
    expect(status.phase).toBe('aborted');
    const description = await handle.describe();
    expect(description.status.name).toBe('FAILED');
    expect(description.typedSearchAttributes.get(PhaseKey)).toBe('aborted');
    expect(await currentDetails(handle)).toBe('');
    const history = await handle.fetchHistory();
    // One read (an activity: its result decides the branch, see workflows/steps/step.ts) and no write.
    const activities = history.events?.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []) ?? [];
    expect(activities).toEqual(['readMoveContext']);
  });
});

const currentDetails = async (handle: WorkflowHandle) => (await handle.query<{ currentDetails: string }>('__temporal_workflow_metadata')).currentDetails;

describe('how a move built on the steps ends, on a real Temporal dev server', () => {
  const taskQueue = `plumbing-ends-${process.pid}`;
  const queue: PartitionView = {
    partition: { ...stream.partition, id: 'q-plumb', kind: 'queue', durability: { mode: 'majority_durable' }, writeRequirement: 2, generation: 3, history: [] },
    progress: { ...stream.progress, partition: 'q-plumb' },
  };
  let worker: Worker;
  let running: Promise<void>;
  let learners: string[] = [];

  beforeAll(async () => {
    const connection = await NativeConnection.connect({ address: temporalAddress() });
    worker = await Worker.create({
      connection,
      namespace: temporalNamespace(),
      taskQueue,
      workflowsPath: WORKFLOWS_PATH,
      activities: createActivities({
        cluster: {
          partition: async () => ({ ...queue, partition: { ...queue.partition, learners } }),
          nodes: async () => ({ generation: 1, now: 0, nodes }),
          // The learner is added and dropped; it never catches up, so the move waits until cancelled.
          write: async (_p, write, request) => {
            learners = write === 'add-learner' ? ['n4'] : [];
            return { ok: true, write, partition: { ...queue.partition, learners, generation: request.expectedGeneration + 1 }, boundary: null };
          },
        },
      }),
    });
    running = worker.run();
  });
  afterAll(async () => {
    worker.shutdown();
    await running;
  });

  async function startMove(partition: string) {
    const client = await connectClient();
    return client.workflow.start(WORKFLOW_TYPE['follower-move'], {
      taskQueue,
      workflowId: `plumbing-end-${partition}-${Date.now()}`,
      args: [{ partition, from: 'n2', to: 'n4', origin: 'operator' }],
    });
  }
  it('a Temporal cancel before the swap drops the learner and ends Canceled, the outcome in the memo', async () => {
    const handle = await startMove('q-plumb');
    await eventually('the learner added', async () => ((await handle.query(statusQuery)).phase === 'catching_up' ? true : undefined));
    expect(await currentDetails(handle)).toContain('waiting for n4 to catch up');
    await handle.cancel();
    expect(await outcomeOf(handle)).toMatchObject({ status: 'cancelled', kind: 'follower-move', reason: 'cancelled through Temporal' });
    expect((await handle.describe()).status.name).toBe('CANCELLED');
    expect(await currentDetails(handle)).toBe('');
    expect(learners).toEqual([]);
  });

  it('a cancel through the update alone (no Temporal cancel request) cannot end Canceled: Failed, its cause a CancelledFailure', async () => {
    const handle = await startMove('q-plumb');
    await eventually('the learner added', async () => ((await handle.query(statusQuery)).phase === 'catching_up' ? true : undefined));
    await handle.executeUpdate(cancelUpdate, { args: [{ reason: 'test' }] });
    const err = await handle.result().catch((e: unknown) => e);
    expect((err as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    expect(await outcomeOf(handle)).toMatchObject({ status: 'cancelled', reason: 'test' });
    expect((await handle.describe()).status.name).toBe('FAILED');
    expect(learners).toEqual([]);
  });
});

describe('the progress relay workflow on a real Temporal dev server', () => {
  const taskQueue = `plumbing-relay-${process.pid}`;
  const partition = `relay-plumbing-${process.pid}`;
  const brokerUrl = 'http://fake-broker.invalid';
  const feed: ClusterEvent[] = [];
  const base = { partition, at: 0, generation: 1 };

  it('delivers every event once across runs and continued histories, and flushes throttled progress at each run end', async () => {
    const client = await connectClient();
    const connection = await NativeConnection.connect({ address: temporalAddress() });
    const worker = await Worker.create({
      connection,
      namespace: temporalNamespace(),
      taskQueue,
      workflowsPath: WORKFLOWS_PATH,
      activities: createRelayActivities({
        client,
        cluster: {
          baseUrl: brokerUrl,
          events: async (after, options) => {
            const events = feed.filter((e) => e.seq > after).slice(0, 3);
            if (events.length === 0) await new Promise((r) => setTimeout(r, Math.min(options?.waitMs ?? 0, 100)));
            return { events, cursor: events.at(-1)?.seq ?? after };
          },
        },
      }),
    });
    const running = worker.run();
    let producer: NodeJS.Timeout | undefined;
    try {
      // Stands in for the partition's move: nobody polls its task queue, it only collects signals.
      const sink = await client.workflow.start(WORKFLOW_TYPE['follower-move'], {
        taskQueue: `${taskQueue}-nobody-polls`,
        workflowId: reconfigurationWorkflowId(partition),
        args: [{ partition, from: 'n1', to: 'n2', origin: 'operator' }],
      });
      const relay = await client.workflow.start<typeof progressRelay>('progressRelay', {
        taskQueue,
        workflowId: `plumbing-relay-${process.pid}`,
        args: [{ brokerUrl, cursor: 0, tuning: { runMs: 400, runsPerHistory: 2, pollWaitMs: 100, batchMs: 10, progressIntervalMs: 60_000 } }],
      });
      // The feed grows while the relay runs, over many runs: an admission and a progress report every 100 ms.
      producer = setInterval(() => {
        const seq = feed.length + 1;
        if (seq > 60) return clearInterval(producer);
        feed.push(
          seq % 2
            ? { ...base, seq, type: 'admitted', node: `n${seq}` }
            : { ...base, seq, type: 'progress', confirmedTail: seq, boundary: null, replicas: [] },
        );
      }, 50);
      const signals = await eventually('every event of the feed relayed', async () => {
        const history = await sink.fetchHistory();
        const got = (history.events ?? [])
          .map((e) => e.workflowExecutionSignaledEventAttributes)
          .filter((a) => !!a)
          .map((a) => ({ name: a.signalName!, payload: defaultPayloadConverter.fromPayload<{ node?: string; confirmedTail?: number }>(a.input!.payloads![0]!) }));
        const last = got.filter((g) => g.name === 'progress').at(-1);
        return feed.length >= 60 && last?.payload.confirmedTail === 60 ? got : undefined;
      });
      // Admissions: each exactly once, in feed order; progress: throttled, but the last report is never lost.
      expect(signals.filter((g) => g.name === 'admitted').map((g) => g.payload.node)).toEqual(
        feed.filter((e) => e.type === 'admitted').map((e) => (e as { node: string }).node),
      );
      const current = await relay.describe();
      expect(current.runId).not.toBe(relay.firstExecutionRunId);
      const history = await client.workflow.getHandle(relay.workflowId).fetchHistory();
      const started = history.events![0]!.workflowExecutionStartedEventAttributes!;
      const input = defaultPayloadConverter.fromPayload<{ cursor: number }>(started.input!.payloads![0]!);
      expect(input.cursor).toBeGreaterThan(0);
      // The first run, which continued as new, replays under the current code (and is kept as a fixture).
      await replayAndKeep(client, relay.workflowId, 'relay-continued-as-new', relay.firstExecutionRunId);
      await relay.terminate('test done');
      await sink.terminate('test done');
    } finally {
      clearInterval(producer);
      worker.shutdown();
      await running;
    }
  });
});
