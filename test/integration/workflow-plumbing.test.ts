/**
 * The Temporal plumbing on a real dev server, with a fake broker injected through createActivities: the
 * workflow bundles, runs to completion, keeps its search attributes and answers its status query.
 */
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities';
import type { Node, PartitionView } from '../../cluster/contract';
import { statusQuery } from '../../workflows/definitions';
import { PhaseKey } from '../../workflows/search-attributes';
import { WORKFLOWS_PATH } from '../../worker/worker';
import { connectClient, temporalAddress } from './helpers';

const stream: PartitionView = {
  partition: {
    id: 's-0', kind: 'stream', owner: 'n1', followers: ['n2', 'n3'], learners: [], leaving: null, epoch: 1, generation: 3,
    replicationFactor: 3, durability: { mode: 'replica_durable', n: 3 }, writeRequirement: 3, history: [],
    pendingRecovery: null, admission: 'open', boundary: null, retainedCopies: [],
  },
  progress: { partition: 's-0', generation: 3, epoch: 1, now: 0, tail: 10, confirmedTail: 10, logStart: 0, messageBytes: 100, boundary: null, replicas: [] },
};
const nodes: Node[] = ['n1', 'n2', 'n3', 'n4'].map((id) => ({
  id, processId: `${id}-1`, storageInstance: `${id}-s`, live: true, capacity: 1, zone: 'z', publishRate: 0, deliveryRate: 0, draining: false,
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

  it('refuses to move a stream partition without writing, and says why', async () => {
    const client = await connectClient();
    const handle = await client.workflow.start('followerMove', {
      taskQueue,
      workflowId: `plumbing-${Date.now()}`,
      args: [{ partition: 's-0', from: 'n2', to: 'n4', origin: 'operator' }],
      typedSearchAttributes: [{ key: PhaseKey, value: 'validating' }],
    });
    const outcome = await handle.result();
    expect(outcome).toMatchObject({ status: 'aborted', code: 'not_a_queue' });
    expect(writes).toEqual([]);
    const status = await handle.query(statusQuery);
    expect(status.phase).toBe('aborted');
    const description = await handle.describe();
    expect(description.typedSearchAttributes.get(PhaseKey)).toBe('aborted');
    const history = await handle.fetchHistory();
    // One read (a local activity, recorded as a marker) and no write.
    expect(history.events?.filter((e) => e.markerRecordedEventAttributes) ?? []).toHaveLength(1);
    expect(history.events?.filter((e) => e.activityTaskScheduledEventAttributes) ?? []).toHaveLength(0);
  });
});
