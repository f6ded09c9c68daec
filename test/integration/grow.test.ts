/**
 * The replication-factor increase end to end (real dev server, real reference cluster over HTTP): the happy
 * path while publishing continues, bad input refused before anything is written, faults at every write
 * boundary, an injected refusal, a second reconfiguration, a cancel and a worker restart. Each case asserts the
 * final assignment (replication factor and W), the outcome and zero invariant breaches. Partitions q-230..q-239.
 *
 * The cluster's nodes sit in zones z1, z2, z3 in turn (n1 z1, n2 z2, n3 z3, n4 z1, ...): partitions placed on
 * n1, n4, n2 share a zone, so only the node count limits them; n1, n2, n3 keep one copy per zone.
 */
import { WorkflowExecutionAlreadyStartedError, type WorkflowHandle } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { startGrow } from '../../operations/grow';
import { cancelMove } from '../../operations/moves';
import { writeRequirement, type Fault, type GuardedWriteName, type Partition } from '../../cluster/contract';
import { reconfigurationWorkflowId, statusQuery } from '../../rules/definitions';
import { KindKey } from '../../rules/search-attributes';
import { counted, eventually, outcomeOf, replayAndKeep, startWorker } from './helpers';
import { type Armed, freshPartition, healAfter, refusal, settled, untilPhase, useSuite } from './grow-helpers';

const taskQueue = `grow-${process.pid}`;
const TIMING = { pollMs: 500, retryMs: 300 };
const t = useSuite(taskQueue);

function create(id: string, replicas = ['n1', 'n4', 'n2'], kind: 'queue' | 'stream' = 'queue'): Promise<Partition> {
  return freshPartition(t.cluster.client, t.relay, id, replicas, kind);
}
async function partition(id: string): Promise<Partition> {
  return (await t.cluster.client.partition(id)).partition;
}

/** The increase happened: T counts, the replication factor rose by one and W follows from it; nothing else moved. */
function expectGrown(before: Partition, after: Partition, to: string): void {
  expect(counted(after)).toEqual([...counted(before), to].sort());
  expect(after.replicationFactor).toBe(before.replicationFactor + 1);
  expect(after.writeRequirement).toBe(writeRequirement(after.durability, before.replicationFactor + 1));
  expect(after.learners).toEqual([]);
  expect(after.leaving).toBeNull();
}

describe('replication-factor increase', () => {
  it('adds a copy while publishing continues: T counts, the factor and W rise together, nothing is removed', async () => {
    const before = await create('q-230');
    const handle = await startGrow(t.ctx, { partition: 'q-230', to: 'n5', origin: 'operator', timing: TIMING });
    const outcome = await handle.result();
    expect(outcome).toMatchObject({ status: 'completed', kind: 'grow', partition: 'q-230', from: null, to: 'n5', boundary: null });
    const after = await partition('q-230');
    expectGrown(before, after, 'n5');
    expect([before.replicationFactor, before.writeRequirement, after.replicationFactor, after.writeRequirement]).toEqual([3, 2, 4, 3]);
    expect(after.history.find((h) => h.node === 'n5')?.suspended).toBe(false);
    // Publishing went on: the confirmed tail is past where it stood when the move started.
    const tail = (await t.cluster.client.partition('q-230')).progress.confirmedTail;
    await eventually('confirms go on under the new W', async () => ((await t.cluster.client.partition('q-230')).progress.confirmedTail > tail ? true : undefined));
    const description = await handle.describe();
    expect(description.typedSearchAttributes.get(KindKey)).toBe('grow');
    await replayAndKeep(t.client, handle.workflowId, 'replication-increase-completed');
  });

  it('refuses bad input before anything is written', async () => {
    const stream = await create('q-232', ['n1', 'n4'], 'stream');
    const wide = await create('q-233', ['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7']);
    const twoZones = await create('q-234', ['n1', 'n2']);
    expect(await refusal(startGrow(t.ctx, { partition: 'q-232', to: 'n5', origin: 'operator' }))).toMatchObject({ code: 'not_a_queue' });
    expect(await refusal(startGrow(t.ctx, { partition: 'q-234', to: 'n4', origin: 'operator' }))).toMatchObject({
      code: 'same_zone',
      message: expect.stringMatching(/^q-234 has 1 copy in z1, where n4 is, and 0 in z3: a copy in z1 would spread its copies over zones less evenly; choose a live node in z3$/),
    });
    expect(await refusal(startGrow(t.ctx, { partition: 'q-234', to: 'n2', origin: 'operator' }))).toMatchObject({ code: 'already_a_replica' });
    expect(await refusal(startGrow(t.ctx, { partition: 'q-239', to: 'n5', origin: 'operator' }))).toMatchObject({ code: 'unknown_partition' });
    // Above the live nodes: seven copies, and one of the eight nodes down leaves seven live for a factor of 8.
    await t.cluster.client.fault({ fault: 'crash-node', node: 'n7' });
    try {
      expect(await refusal(startGrow(t.ctx, { partition: 'q-233', to: 'n8', origin: 'operator' }))).toMatchObject({
        code: 'too_few_nodes',
        message: expect.stringMatching(/replication factor 8 for q-233 needs 8 live nodes, one per copy; the cluster has 7/),
      });
    } finally {
      await t.cluster.client.fault({ fault: 'restart-node', node: 'n7' });
    }
    for (const [id, p] of [['q-232', stream], ['q-233', wide], ['q-234', twoZones]] as const) {
      const now = await partition(id);
      expect([now.owner, now.followers, now.learners, now.replicationFactor]).toEqual([p.owner, p.followers, p.learners, p.replicationFactor]);
      await expect(t.client.workflow.getHandle(reconfigurationWorkflowId(id)).describe()).rejects.toThrow();
    }
    await settled(t.cluster.client, 'q-233');
  });

  it('grows past the number of zones: 5 copies over z1, z2, z3, each new one where the spread stays even', async () => {
    const before = await create('q-231', ['n1', 'n2', 'n3']);
    let handle: WorkflowHandle | undefined;
    for (const to of ['n4', 'n5']) {
      handle = await startGrow(t.ctx, { partition: 'q-231', to, origin: 'operator', timing: TIMING });
      expect(await handle.result()).toMatchObject({ status: 'completed', kind: 'grow', partition: 'q-231', to });
    }
    const after = await partition('q-231');
    expect(counted(after)).toEqual(['n1', 'n2', 'n3', 'n4', 'n5']);
    expect([after.replicationFactor, after.writeRequirement]).toEqual([5, writeRequirement(before.durability, 5)]);
    // A sixth in z1 or z2 would hold three where z3 holds one: refused, naming the zone that may take it.
    expect(await refusal(startGrow(t.ctx, { partition: 'q-231', to: 'n7', origin: 'operator' }))).toMatchObject({
      code: 'same_zone',
      message: expect.stringMatching(/^q-231 has 2 copies in z1, where n7 is, and 1 in z3: .*choose a live node in z3$/),
    });
    await replayAndKeep(t.client, handle!.workflowId, 'replication-increase-zone-spread');
  });

  it('refuses a second reconfiguration while one runs, then a cancel drops the learner', async () => {
    const before = await create('q-235');
    await t.cluster.client.fault({ fault: 'stall-transfer', partition: 'q-235', node: 'n5', stalled: true });
    const handle = await startGrow(t.ctx, { partition: 'q-235', to: 'n5', origin: 'operator', timing: TIMING });
    await untilPhase(t.client, 'q-235', ['catching_up']);
    expect(await refusal(startGrow(t.ctx, { partition: 'q-235', to: 'n6', origin: 'operator' }))).toMatchObject({
      code: 'reconfiguration_running',
      message: expect.stringMatching(/already running: workflow reconfigure-q-235/),
    });
    // Past the client's own check, Temporal itself refuses a second workflow with the same id.
    await expect(
      t.client.workflow.start('replicationIncrease', { workflowId: handle.workflowId, taskQueue, args: [{ partition: 'q-235', to: 'n6', origin: 'operator' }] }),
    ).rejects.toBeInstanceOf(WorkflowExecutionAlreadyStartedError);
    await cancelMove(t.client, 'q-235', 'test: cancel the increase');
    expect(await outcomeOf(handle)).toMatchObject({ status: 'cancelled', partition: 'q-235' });
    await replayAndKeep(t.client, handle.workflowId, 'replication-increase-cancelled');
    await t.cluster.client.fault({ fault: 'stall-transfer', partition: 'q-235', node: 'n5', stalled: false });
    const after = await partition('q-235');
    expect(after).toMatchObject({ followers: before.followers, learners: [], replicationFactor: 3, writeRequirement: 2 });
  });

  it('survives a worker restart while T catches up', async () => {
    const before = await create('q-236');
    await t.cluster.client.fault({ fault: 'stall-transfer', partition: 'q-236', node: 'n6', stalled: true });
    const queue = `${taskQueue}-restart`;
    const first = await startWorker(t.cluster.url, queue);
    const handle = await startGrow({ ...t.ctx, taskQueue: queue }, { partition: 'q-236', to: 'n6', origin: 'operator', timing: TIMING });
    await untilPhase(t.client, 'q-236', ['catching_up']);
    first.w.shutdown();
    await first.running;
    await t.cluster.client.fault({ fault: 'stall-transfer', partition: 'q-236', node: 'n6', stalled: false });
    const second = await startWorker(t.cluster.url, queue);
    try {
      expect(await handle.result()).toMatchObject({ status: 'completed', to: 'n6' });
      await replayAndKeep(t.client, handle.workflowId, 'replication-increase-worker-restarted');
    } finally {
      second.w.shutdown();
      await second.running;
    }
    expectGrown(before, await partition('q-236'), 'n6');
  });

  it.each<GuardedWriteName>(['add-learner', 'promote-learner'])('passes an injected refusal of %s and completes', async (write) => {
    const id = write === 'add-learner' ? 'q-237' : 'q-238';
    const before = await create(id);
    await t.cluster.client.fault({ fault: 'refuse-next-write', partition: id, write });
    const handle = await startGrow(t.ctx, { partition: id, to: 'n5', origin: 'operator', timing: TIMING });
    expect(await handle.result()).toMatchObject({ status: 'completed' });
    expect((await handle.query(statusQuery)).retries).toBeGreaterThanOrEqual(1);
    expectGrown(before, await partition(id), 'n5');
  });
});

type Victim = 'owner' | 'T' | 'recovery';
const cases = (['add-learner', 'promote-learner'] as GuardedWriteName[]).flatMap((write) =>
  (['before', 'after'] as const).flatMap((when) => (['owner', 'T', 'recovery'] as Victim[]).map((victim) => ({ write, when, victim }))),
);

/** A failed owner (or an opened recovery) never stops an operator's increase; T failing before it counts ends it. */
function expected(write: GuardedWriteName, when: 'before' | 'after', victim: Victim): string {
  if (victim !== 'T' || (write === 'promote-learner' && when === 'after')) return 'completed';
  return write === 'add-learner' && when === 'before' ? 'aborted:node_down' : 'aborted:target_down';
}

describe('faults at every write boundary of an increase', () => {
  // One partition id for every case, created afresh: the file's ids are few (q-230..q-239).
  it.each(cases)('$victim fails $when $write', async ({ write, when, victim }) => {
    const id = 'q-239';
    const before = await create(id);
    const to = 'n5';
    const node = victim === 'owner' ? before.owner : victim === 'T' ? to : null;
    const fault: Fault = node ? { fault: 'crash-node', node } : { fault: 'fail-owner', partition: id };
    const a: Armed = { partition: id, write, when, faults: [fault], fired: false };
    t.armed.current = a;
    const handle: WorkflowHandle = await startGrow(t.ctx, { partition: id, to, origin: 'operator', timing: TIMING });
    const outcome = await healAfter(t.cluster.client, a, node, outcomeOf(handle));
    expect(a.fired).toBe(true);
    const after = await settled(t.cluster.client, id);
    expect(outcome.status === 'aborted' ? `aborted:${outcome.code}` : outcome.status).toBe(expected(write, when, victim));
    if (outcome.status === 'completed') expectGrown(before, after, to);
    else expect(after).toMatchObject({ learners: [], replicationFactor: 3, writeRequirement: 2 });
  });
});
