/**
 * A returning replica, both ways the note names (real dev server, real reference cluster over HTTP):
 * - on an unchanged placement a restarted follower is the broker's own path: suspended, it rejoins through
 *   learner admission, with no workflow at all;
 * - on a changed placement (its copy was removed while it was away) it comes back through step 0 of whatever
 *   operation targets it, here a replacement with T = the returning node: add-learner starts from the node's
 *   retained copy, so the transfer copies only the messages after that copy's durable offset (measured while the
 *   transfer is held, then the replacement is cancelled).
 * Partitions q-252..q-259.
 */
import { describe, expect, it } from 'vitest';
import { startReplace } from '../../operations/grow';
import { cancelMove } from '../../operations/moves';
import { reconfigurationWorkflowId, statusQuery } from '../../rules/definitions';
import { freshPartition, settled, useSuite } from './grow-helpers';
import { counted, eventually, outcomeOf } from './helpers';

const taskQueue = `returning-${process.pid}`;
const TIMING = { pollMs: 500, retryMs: 300 };
const MESSAGE_BYTES = 1_024;
const t = useSuite(taskQueue, { messageBytes: MESSAGE_BYTES });


describe('a returning replica', () => {
  it('on an unchanged placement: a restarted follower is suspended and re-admitted by the broker, with no workflow', async () => {
    const before = await freshPartition(t.cluster.client, t.relay, 'q-252', ['n1', 'n4', 'n2']);
    let cursor = 0;
    for (let page = await t.cluster.client.events(0, { limit: 10_000 }); page.events.length > 0; page = await t.cluster.client.events(cursor, { limit: 10_000 })) cursor = page.cursor;
    await t.cluster.client.fault({ fault: 'restart-node', node: 'n2' });
    const after = await settled(t.cluster.client, 'q-252');
    // Read from the feed, not the partition: a caught-up copy is re-admitted a tick or two after its suspension,
    // often before a read that follows the restart.
    const feed = (await t.cluster.client.events(cursor, { limit: 10_000 })).events;
    const ofN2 = feed.filter((e) => 'partition' in e && e.partition === 'q-252' && 'node' in e && e.node === 'n2').map((e) => e.type);
    expect(ofN2).toEqual(['suspended', 'admitted']);
    expect(counted(after)).toEqual(counted(before));
    expect(after.history.find((h) => h.node === 'n2')?.processId).not.toBe(before.history.find((h) => h.node === 'n2')?.processId);
    expect([after.replicationFactor, after.writeRequirement, after.epoch]).toEqual([before.replicationFactor, before.writeRequirement, before.epoch]);
    await expect(t.client.workflow.getHandle(reconfigurationWorkflowId('q-252')).describe()).rejects.toThrow(/not found/i);
  });

  it('on a changed placement: a node whose copy was removed comes back and a replacement onto it copies only the tail', async () => {
    const id = 'q-253';
    // Slow publishing: the owner keeps the last 1,000 messages for followers, so the returning copy stays within the log.
    await freshPartition(t.cluster.client, t.relay, id, ['n1', 'n4', 'n2']);
    await t.cluster.client.setRate(id, 10);
    // n2 is lost and replaced by n3 (z3, where the partition had no copy): n2's copy leaves the assignment but stays
    // retained on its disk, and z2 is left without a copy, so n2 may take one again.
    await t.cluster.client.fault({ fault: 'crash-node', node: 'n2' });
    const first = await startReplace(t.ctx, { partition: id, lost: 'n2', with: 'n3', origin: 'operator', timing: TIMING });
    expect(await first.result()).toMatchObject({ status: 'completed', from: 'n2', to: 'n3' });
    const retained = (await t.cluster.client.partition(id)).partition.retainedCopies.find((c) => c.node === 'n2');
    expect(retained?.durableOffset).toBeGreaterThan(0);
    const kept = retained!.durableOffset;

    // n2 comes back with its disk; then n4 is lost, and n2 replaces it, starting from its retained copy.
    await t.cluster.client.fault({ fault: 'restart-node', node: 'n2' });
    // A tail worth measuring: at least 200 messages published since n2's copy stopped.
    await eventually('200 messages past the retained copy', async () => ((await t.cluster.client.partition(id)).progress.tail >= kept + 200 ? true : undefined));
    await t.cluster.client.fault({ fault: 'crash-node', node: 'n4' });
    await t.cluster.client.fault({ fault: 'stall-transfer', partition: id, node: 'n2', stalled: true });
    const back = await startReplace(t.ctx, { partition: id, lost: 'n4', with: 'n2', origin: 'operator', timing: TIMING });
    const learner = await eventually('n2 a learner', async () => {
      const view = await t.cluster.client.partition(id);
      const r = view.progress.replicas.find((x) => x.node === 'n2' && x.role === 'learner');
      return r ? { ...r, tail: view.progress.tail, logStart: view.progress.logStart } : undefined;
    });
    // The copy starts at the retained durable offset and owes only the messages after it, no checkpoint.
    expect(learner.durableOffset).toBe(kept);
    expect(learner.phase).toBe('tail');
    expect(learner.bytesRemaining).toBeGreaterThan(0);
    expect(learner.bytesRemaining).toBeLessThanOrEqual((learner.tail - kept) * MESSAGE_BYTES);
    const status = await eventually('the workflow sees the transfer', async () => {
      const s = await back.query(statusQuery);
      return s.bytesRemaining !== null ? s : undefined;
    });
    const tailNow = (await t.cluster.client.partition(id)).progress.tail;
    expect(status.bytesRemaining).toBeLessThanOrEqual((tailNow - kept) * MESSAGE_BYTES);
    console.log(
      `returning replica: retained copy durable at ${kept} of tail ${learner.tail}: ${learner.bytesRemaining} bytes to copy, ` +
        `against ${learner.tail * MESSAGE_BYTES} bytes for the whole log (a copy from empty copies a checkpoint of the last ${learner.tail - learner.logStart} messages and the tail)`,
    );
    // Measured: the replacement is cancelled before its swap, which drops the learner and changes nothing counted.
    await cancelMove(t.client, id, 'test: the transfer was measured');
    expect(await outcomeOf(back)).toMatchObject({ status: 'cancelled' });
    const after = (await t.cluster.client.partition(id)).partition;
    expect([counted(after), after.learners]).toEqual([['n1', 'n3', 'n4'], []]);
    await t.cluster.client.fault({ fault: 'restart-node', node: 'n4' });
  });
});
