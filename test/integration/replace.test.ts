/**
 * The lost-follower replacement end to end (real dev server, real reference cluster over HTTP): the happy path
 * while publishing continues with L never coming back, bad input refused before anything is written, a second
 * reconfiguration, a cancel, a worker restart, injected refusals and faults at every write boundary (the owner,
 * T, L coming back, a recovery opened). Each case asserts the final assignment, the outcome and zero invariant
 * breaches. Partitions q-240..q-251 (n1, n4, n2 share zone z1 and z2 between them, so only nodes limit them).
 */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { startGrow, startReplace } from '../../operations/grow';
import { cancelMove } from '../../operations/moves';
import type { Fault, GuardedWriteName, Partition } from '../../cluster/contract';
import { reconfigurationWorkflowId, statusQuery } from '../../rules/definitions';
import { KindKey } from '../../rules/search-attributes';
import { type Armed, freshPartition, healAfter, refusal, settled, untilPhase, useSuite } from './grow-helpers';
import { counted, eventually, outcomeOf, replayAndKeep, startWorker } from './helpers';

const taskQueue = `replace-${process.pid}`;
const TIMING = { pollMs: 500, retryMs: 300 };
const t = useSuite(taskQueue);

async function partition(id: string): Promise<Partition> {
  return (await t.cluster.client.partition(id)).partition;
}

/** A partition on n1, n4, n2 whose follower `lost` is down. */
async function withLost(id: string, lost = 'n2'): Promise<Partition> {
  await bringBack(lost);
  const p = await freshPartition(t.cluster.client, t.relay, id, ['n1', 'n4', 'n2']);
  await t.cluster.client.fault({ fault: 'crash-node', node: lost });
  return p;
}
async function bringBack(node: string): Promise<void> {
  if (!(await t.cluster.client.nodes()).nodes.find((n) => n.id === node)!.live) await t.cluster.client.fault({ fault: 'restart-node', node });
}

/** T counts in L's place and L left the eligible set; the replication factor and W did not change. */
function expectReplaced(before: Partition, after: Partition, lost: string, to: string): void {
  expect(counted(after)).toEqual(counted(before).map((n) => (n === lost ? to : n)).sort());
  expect(after.history.map((h) => h.node)).not.toContain(lost);
  expect([after.replicationFactor, after.writeRequirement]).toEqual([before.replicationFactor, before.writeRequirement]);
  expect([after.learners, after.leaving]).toEqual([[], null]);
}

describe('lost-follower replacement', () => {
  it('replaces a follower whose node never comes back while publishing continues', async () => {
    const before = await withLost('q-240');
    const handle = await startReplace(t.ctx, { partition: 'q-240', lost: 'n2', with: 'n5', origin: 'operator', timing: TIMING });
    const outcome = await handle.result();
    expect(outcome).toMatchObject({ status: 'completed', kind: 'replace', partition: 'q-240', from: 'n2', to: 'n5', boundary: expect.any(Number) });
    const after = await partition('q-240');
    expectReplaced(before, after, 'n2', 'n5');
    // L was down from start to end, and keeps what its disk held as a retained copy.
    expect((await t.cluster.client.nodes()).nodes.find((n) => n.id === 'n2')?.live).toBe(false);
    expect(after.retainedCopies.map((c) => c.node)).toContain('n2');
    const tail = (await t.cluster.client.partition('q-240')).progress.confirmedTail;
    await eventually('confirms go on', async () => ((await t.cluster.client.partition('q-240')).progress.confirmedTail > tail ? true : undefined));
    expect((await handle.describe()).typedSearchAttributes.get(KindKey)).toBe('replace');
    await replayAndKeep(t.client, handle.workflowId, 'follower-replacement-completed');
  });

  it('refuses bad input before anything is written', async () => {
    await bringBack('n2');
    const live = await freshPartition(t.cluster.client, t.relay, 'q-241', ['n1', 'n4', 'n2']);
    await freshPartition(t.cluster.client, t.relay, 'q-242', ['n1', 'n4'], 'stream');
    expect(await refusal(startReplace(t.ctx, { partition: 'q-241', lost: 'n2', with: 'n5', origin: 'operator' }))).toMatchObject({
      code: 'not_lost',
      message: expect.stringMatching(/n2 is a (suspended )?follower of q-241 on a live node/),
    });
    expect(await refusal(startReplace(t.ctx, { partition: 'q-241', lost: 'n1', with: 'n5', origin: 'operator' }))).toMatchObject({
      code: 'not_lost',
      message: expect.stringMatching(/n1 owns q-241: a lost owner is the broker's recovery/),
    });
    expect(await refusal(startReplace(t.ctx, { partition: 'q-241', lost: 'n6', with: 'n5', origin: 'operator' }))).toMatchObject({
      code: 'not_lost',
      message: expect.stringMatching(/n6 is not a replica of q-241/),
    });
    expect(await refusal(startReplace(t.ctx, { partition: 'q-242', lost: 'n4', with: 'n5', origin: 'operator' }))).toMatchObject({ code: 'not_a_queue' });
    const now = await partition('q-241');
    expect([now.owner, now.followers, now.learners]).toEqual([live.owner, live.followers, live.learners]);
    for (const id of ['q-241', 'q-242']) await expect(t.client.workflow.getHandle(reconfigurationWorkflowId(id)).describe()).rejects.toThrow();
  });

  it('refuses a second reconfiguration while one runs, then a cancel drops the learner', async () => {
    const before = await withLost('q-243');
    await t.cluster.client.fault({ fault: 'stall-transfer', partition: 'q-243', node: 'n6', stalled: true });
    const handle = await startReplace(t.ctx, { partition: 'q-243', lost: 'n2', with: 'n6', origin: 'operator', timing: TIMING });
    await untilPhase(t.client, 'q-243', ['catching_up']);
    // One at a time: a start made before the loop reaches it can be refused with nothing awaiting it yet, which
    // Node reports as an unhandled rejection.
    for (const second of [
      () => startReplace(t.ctx, { partition: 'q-243', lost: 'n2', with: 'n5', origin: 'operator' }),
      () => startGrow(t.ctx, { partition: 'q-243', to: 'n5', origin: 'operator' }),
    ]) {
      expect(await refusal(second())).toMatchObject({ code: 'reconfiguration_running', message: expect.stringMatching(/workflow reconfigure-q-243/) });
    }
    await expect(
      t.client.workflow.start('followerReplacement', { workflowId: handle.workflowId, taskQueue, args: [{ partition: 'q-243', lost: 'n2', with: 'n5', origin: 'operator' }] }),
    ).rejects.toBeInstanceOf(WorkflowExecutionAlreadyStartedError);
    await cancelMove(t.client, 'q-243', 'test: cancel the replacement');
    expect(await outcomeOf(handle)).toMatchObject({ status: 'cancelled' });
    await replayAndKeep(t.client, handle.workflowId, 'follower-replacement-cancelled');
    await t.cluster.client.fault({ fault: 'stall-transfer', partition: 'q-243', node: 'n6', stalled: false });
    expect(counted(await partition('q-243'))).toEqual(counted(before));
    expect((await partition('q-243')).learners).toEqual([]);
  });

  it('survives a worker restart while T catches up, and passes injected refusals of the swap and the removal', async () => {
    const before = await withLost('q-245');
    await t.cluster.client.fault({ fault: 'stall-transfer', partition: 'q-245', node: 'n6', stalled: true });
    await t.cluster.client.fault({ fault: 'refuse-next-write', partition: 'q-245', write: 'swap' });
    await t.cluster.client.fault({ fault: 'refuse-next-write', partition: 'q-245', write: 'remove-leaving' });
    const queue = `${taskQueue}-restart`;
    const first = await startWorker(t.cluster.url, queue);
    const handle = await startReplace({ ...t.ctx, taskQueue: queue }, { partition: 'q-245', lost: 'n2', with: 'n6', origin: 'operator', timing: TIMING });
    await untilPhase(t.client, 'q-245', ['catching_up']);
    first.w.shutdown();
    await first.running;
    await t.cluster.client.fault({ fault: 'stall-transfer', partition: 'q-245', node: 'n6', stalled: false });
    const second = await startWorker(t.cluster.url, queue);
    try {
      expect(await handle.result()).toMatchObject({ status: 'completed', to: 'n6' });
      expect((await handle.query(statusQuery)).retries).toBeGreaterThanOrEqual(2);
      await replayAndKeep(t.client, handle.workflowId, 'follower-replacement-worker-restarted');
    } finally {
      second.w.shutdown();
      await second.running;
    }
    expectReplaced(before, await partition('q-245'), 'n2', 'n6');
  });
});

type Victim = 'owner' | 'T' | 'L' | 'recovery';
const cases = (['add-learner', 'swap', 'remove-leaving'] as GuardedWriteName[]).flatMap((write) =>
  (['before', 'after'] as const).flatMap((when) => (['owner', 'T', 'L', 'recovery'] as Victim[]).map((victim) => ({ write, when, victim }))),
);

/** Only T failing before it counts ends a replacement; past the swap it always finishes, whoever fails or returns. */
function expected(write: GuardedWriteName, when: 'before' | 'after', victim: Victim): string {
  if (victim !== 'T' || write === 'remove-leaving' || (write === 'swap' && when === 'after')) return 'completed';
  return write === 'add-learner' && when === 'before' ? 'aborted:node_down' : 'aborted:target_down';
}

describe('faults at every write boundary of a replacement', () => {
  // One partition id for every case, created afresh: the file's ids are few.
  it.each(cases)('$victim fails $when $write', async ({ write, when, victim }) => {
    const id = 'q-246';
    const before = await withLost(id);
    const to = 'n5';
    // L "fails" by coming back: a restarted process with its disk, rejoining as the broker's own path.
    const node = victim === 'owner' ? before.owner : victim === 'T' ? to : null;
    const fault: Fault = victim === 'L' ? { fault: 'restart-node', node: 'n2' } : node ? { fault: 'crash-node', node } : { fault: 'fail-owner', partition: id };
    const a: Armed = { partition: id, write, when, faults: [fault], fired: false };
    t.armed.current = a;
    const handle = await startReplace(t.ctx, { partition: id, lost: 'n2', with: to, origin: 'operator', timing: TIMING });
    const outcome = await healAfter(t.cluster.client, a, node, outcomeOf(handle));
    expect(a.fired).toBe(true);
    await bringBack('n2');
    const after = await settled(t.cluster.client, id);
    expect(outcome.status === 'aborted' ? `aborted:${outcome.code}` : outcome.status).toBe(expected(write, when, victim));
    if (outcome.status === 'completed') expectReplaced(before, after, 'n2', to);
    else expect([counted(after), after.learners]).toEqual([counted(before), []]);
  });
});
