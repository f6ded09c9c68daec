/**
 * Owner move onto a node that holds no copy yet, on a real dev server and a real reference cluster (wall clock,
 * publishing all along): a follower move of `via` to T, then a handoff from A to T, as one workflow with one
 * status. Partitions q-227 and q-228 only (workflow ids are shared with the other test files on the dev server).
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMoveFrom, startOwnerMove } from '../../operations/handoff';
import { cancelMove, MoveRefused, outcomeOf, type MovesContext } from '../../operations/moves';
import type { Partition } from '../../cluster/contract';
import { KindKey } from '../../rules/search-attributes';
import { statusQuery, type MoveOutcome, type MoveStatus, type OwnerMoveRequest } from '../../rules/definitions';
import { runCli } from '../../client/cli';
import { eventually, replayAndKeep, startSuite, temporalEnv, type TestCluster } from './helpers';

let cluster: TestCluster;
let client: Client;
let ctx: MovesContext;
let stop: (() => Promise<void>) | undefined;

beforeAll(async () => {
  const taskQueue = `owner-move-${process.pid}`;
  ({ cluster, client, ctx, stop } = await startSuite(taskQueue, { shape: { nodes: 6, partitions: 0, streams: 0 } }));
  Object.assign(process.env, { ...temporalEnv(), CLUSTER_URL: cluster.url, TEMPORAL_TASK_QUEUE: taskQueue });
});

afterAll(async () => {
  await stop?.();
});

/** How it ended, whatever Temporal status it ended in (every ending carries an outcome). */
async function ended(handle: WorkflowHandle): Promise<MoveOutcome> {
  const outcome = await outcomeOf(handle);
  if (!outcome) throw new Error(`${handle.workflowId} ended without an outcome`);
  return outcome;
}

const timing = { pollMs: 1_000, retryMs: 300 };
const shape = (p: Partition) => ({ copies: 1 + p.followers.length, replicationFactor: p.replicationFactor, writeRequirement: p.writeRequirement });

describe('owner move', () => {
  it('moves the owner of q-227 onto n5: via the follower in n5\'s zone, then a handoff; one workflow, one status', async () => {
    // n1 (zone z1) owns; n2 (z2) and n3 (z3) follow; n5 is in z2, so n2's copy moves.
    const { partition: before } = await cluster.client.createPartition({ id: 'q-227', replicas: ['n1', 'n2', 'n3'] });
    const { kind, handle } = await startMoveFrom(ctx, { partition: 'q-227', from: 'n1', to: 'n5', origin: 'operator', timing });
    expect(kind).toBe('owner-move');
    const seen: MoveStatus[] = [];
    const watcher = (async () => {
      for (;;) {
        const s = await handle.query(statusQuery).catch(() => null);
        if (s) seen.push(s);
        if (s?.outcome) return;
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const outcome = await ended(handle);
    await watcher;
    expect(outcome).toMatchObject({ status: 'completed', kind: 'owner-move', partition: 'q-227', from: 'n1', to: 'n5', epoch: before.epoch + 1 });
    if (outcome.status !== 'completed') throw new Error('unreachable');
    expect(outcome.boundary).toEqual(expect.any(Number));
    expect(outcome.finalBoundary).toBeGreaterThanOrEqual(outcome.boundary!);
    expect(outcome.admissionClosedMs).toBeGreaterThanOrEqual(0);
    // One status all along: the follower-move stage first, then the handoff, both naming via.
    expect(seen.every((s) => s.kind === 'owner-move' && s.via === 'n2')).toBe(true);
    const stages = seen.map((s) => s.stage).filter((s, i, all) => s !== all[i - 1]);
    expect(stages).toEqual(['follower_move', 'handoff']);
    await replayAndKeep(client, handle.workflowId, 'owner-move-completed');
    expect(seen.at(-1)).toMatchObject({ stage: 'handoff', phase: 'completed', admissionClosedMs: outcome.admissionClosedMs });

    const after = (await cluster.client.partition('q-227')).partition;
    expect(after.owner).toBe('n5');
    expect([...after.followers].sort()).toEqual(['n1', 'n3']);
    expect(after.history.map((h) => h.node)).not.toContain('n2');
    expect(after.admission).toBe('open');
    expect(shape(after)).toEqual(shape(before));
    expect((await cluster.client.invariants()).breaches).toEqual([]);
    const d = await handle.describe();
    expect(d.typedSearchAttributes.get(KindKey)).toBe('owner-move');
    console.log(`owner move q-227 n1 -> n5 via n2: boundary ${outcome.boundary}, admission closed ${outcome.admissionClosedMs} ms`);
  });

  it('a cancel during the follower-move stage drops the learner; A stays the owner', async () => {
    const { partition: before } = await cluster.client.createPartition({ id: 'q-228', replicas: ['n2', 'n3', 'n4'] });
    // T's transfer stalled: the move waits in catching_up.
    await cluster.client.fault({ fault: 'stall-transfer', partition: 'q-228', node: 'n6', stalled: true });
    const handle = await startOwnerMove(ctx, { partition: 'q-228', from: 'n2', to: 'n6', via: 'n4', origin: 'operator', timing });
    await eventually('catching up', async () => {
      const s = await handle.query(statusQuery);
      return s.phase === 'catching_up' && s.stage === 'follower_move' ? s : undefined;
    });
    await cancelMove(client, 'q-228', 'not now');
    expect(await ended(handle)).toMatchObject({ status: 'cancelled', kind: 'owner-move' });
    await replayAndKeep(client, handle.workflowId, 'owner-move-cancelled');
    await cluster.client.fault({ fault: 'stall-transfer', partition: 'q-228', node: 'n6', stalled: false });
    const after = (await cluster.client.partition('q-228')).partition;
    expect(after).toMatchObject({ owner: 'n2', learners: [], admission: 'open', epoch: before.epoch });
    expect([...after.followers].sort()).toEqual(['n3', 'n4']);
    expect((await cluster.client.invariants()).breaches).toEqual([]);
  });

  it('refuses bad input before anything is written, saying what would be accepted', async () => {
    const id = 'q-228';
    const { partition: p } = await cluster.client.partition(id);
    const refused = async (req: Omit<OwnerMoveRequest, 'origin'>, code: string, message: RegExp) => {
      const err = await startOwnerMove(ctx, { ...req, origin: 'operator' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MoveRefused);
      expect(err).toMatchObject({ code, message: expect.stringMatching(message) });
    };
    await refused({ partition: id, from: 'n2', to: 'n3' }, 'already_a_follower', /n3 is already a follower of q-228: hand the owner to it instead \(rebalancer handoff q-228 --to n3\)/);
    await refused({ partition: id, from: 'n3', to: 'n6' }, 'not_the_owner', /n3 does not own q-228 \(its owner is n2\)/);
    await refused({ partition: id, from: 'n2', to: 'n6', via: 'n5' }, 'not_a_follower', /n5 is not a replica of q-228/);
    await cluster.client.fault({ fault: 'crash-node', node: 'n6' });
    await refused({ partition: id, from: 'n2', to: 'n6' }, 'node_down', /target n6 is down/);
    await cluster.client.fault({ fault: 'restart-node', node: 'n6' });
    // --from a follower is a follower move, as before.
    const err = await startMoveFrom(ctx, { partition: id, from: 'n3', to: 'n3', origin: 'operator' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'same_node' });
    expect((await cluster.client.partition(id)).partition.generation).toBe(p.generation);
  });

  it('the CLI: move --from the owner is an owner move, handoff hands it back, a bad handoff is refused with --json', async () => {
    const cli = async (...argv: string[]) => {
      let out = '';
      let err = '';
      const code = await runCli(argv, { out: (t) => void (out += t), err: (t) => void (err += t) });
      return { code, out, err };
    };
    // q-228: n2 owns it, n3 and n4 follow (after the cases above).
    const moved = await cli('move', 'q-228', '--from', 'n2', '--to', 'n5', '--wait', '--reason', 'n2 owns too much');
    expect(moved.code, moved.err + moved.out).toBe(0);
    expect(moved.out).toMatch(/completed: q-228 n2 -> n5/);
    const back = await cli('handoff', 'q-228', '--to', 'n2', '--wait');
    expect(back.code, back.err + back.out).toBe(0);
    expect(back.out).toMatch(/completed: q-228 n5 -> n2[\s\S]*admission was closed \d+ ms; final boundary \d+/);
    const bad = await cli('handoff', 'q-228', '--to', 'n6', '--json');
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.out)).toMatchObject({ ok: false, code: 'not_a_follower', message: expect.stringMatching(/n6 is not a replica of q-228/) });
    expect((await cluster.client.partition('q-228')).partition).toMatchObject({ owner: 'n2', admission: 'open' });
    expect((await cluster.client.invariants()).breaches).toEqual([]);
  });
});
