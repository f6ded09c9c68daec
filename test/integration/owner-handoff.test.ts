/**
 * Planned owner handoff on a real dev server and a real reference cluster (wall clock, publishing all along):
 * the happy path with no publish lost or duplicated across the switch, faults at every write boundary
 * (the owner A, the new owner D, the other follower F failing, a recovery opened, a write refused, just before
 * and just after close-admission and commit-owner), cancel before and after the commit, a stall past the
 * bound, a quiet point never reached, the worker killed while admission is closed, and bad input. Partitions
 * q-200..q-226 and q-229 only (workflow ids are shared with the other test files on the dev server).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHandoff } from '../../operations/handoff';
import { cancelMove, MoveRefused, outcomeOf, startFollowerMove, type MovesContext } from '../../operations/moves';
import type { Fault, GuardedWriteName, Partition } from '../../cluster/contract';
import { statusQuery, type HandoffRequest, type MoveOutcome, type MovePhase } from '../../rules/definitions';
import { eventually, replayAndKeep, startSuite, temporalEnv, type TestCluster } from './helpers';
import { spawnWorker } from './processes';
import { armFault, healAfter, type Armed } from './write-faults';

let cluster: TestCluster;
let client: Client;
let ctx: MovesContext;
let stop: (() => Promise<void>) | undefined;
const taskQueue = `owner-handoff-${process.pid}`;

let armed: Armed | null = null;

beforeAll(async () => {
  ({ cluster, client, ctx, stop } = await startSuite(taskQueue, { shape: { nodes: 6, partitions: 0, streams: 0 }, wrap: (real) => armFault(real, () => armed) }));
});

afterAll(async () => {
  await stop?.();
});

/** A new queue partition q-<n> on three nodes (owner first), its replicas admitted and caught up. */
async function partitionOn(n: number, replicas: [string, string, string], kind: 'queue' | 'stream' = 'queue'): Promise<Partition> {
  const id = `q-${n}`;
  const { partition } = await cluster.client.createPartition({ id, kind, replicas });
  return partition;
}

/** How it ended, whatever Temporal status it ended in (every ending carries an outcome). */
async function ended(handle: WorkflowHandle): Promise<MoveOutcome> {
  const outcome = await outcomeOf(handle);
  if (!outcome) throw new Error(`${handle.workflowId} ended without an outcome`);
  return outcome;
}

function inPhase(handle: WorkflowHandle, phases: MovePhase[], also: (reason: string | null) => boolean = () => true) {
  return eventually(`phase ${phases.join('/')}`, async () => {
    const s = await handle.query(statusQuery);
    return phases.includes(s.phase) && also(s.blockingReason) ? s : undefined;
  }, 120_000);
}

const request = (partition: string, from: string, to: string, extra: Partial<HandoffRequest> = {}): HandoffRequest => ({
  partition, from, to, origin: 'operator', timing: { pollMs: 1_000, retryMs: 300 }, ...extra,
});

/** Counted copies and W, which a handoff never changes. */
function shape(p: Partition) {
  return { copies: 1 + p.followers.length, replicationFactor: p.replicationFactor, writeRequirement: p.writeRequirement };
}

describe('owner handoff: the happy path while publishing continues', () => {
  it('hands q-220 from A to D: D owns it at epoch + 1, A stays a follower, no publish lost or duplicated', async () => {
    const before = await partitionOn(220, ['n1', 'n2', 'n3']);
    const id = before.id;
    // Published through the test control beside the cluster's own publishing (its wall clock, 50/s): every reply
    // names the offsets the messages got, so a duplicate is an overlap and a loss is an offset the new owner lacks.
    const published: { firstOffset: number; nextOffset: number }[] = [];
    const samples: { tail: number; confirmedTail: number }[] = [];
    let stop = false;
    const publisher = (async () => {
      while (!stop) {
        published.push(await cluster.client.publish(id, 3));
        const { tail, confirmedTail } = await cluster.client.progress(id);
        samples.push({ tail, confirmedTail });
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    await eventually('publishing', async () => (published.length >= 5 ? true : undefined));

    const handle = await startHandoff(ctx, request(id, 'n1', 'n2', { reason: 'the owner carries the most load' }));
    const outcome = await ended(handle);
    await new Promise((r) => setTimeout(r, 300));
    stop = true;
    await publisher;

    expect(outcome).toMatchObject({ status: 'completed', kind: 'owner-handoff', partition: id, from: 'n1', to: 'n2', epoch: before.epoch + 1 });
    if (outcome.status !== 'completed') throw new Error('unreachable');
    expect(outcome.finalBoundary).toBeGreaterThan(0);
    expect(outcome.admissionClosedMs).toBeGreaterThanOrEqual(0);
    const status = await handle.query(statusQuery);
    expect(status).toMatchObject({ kind: 'owner-handoff', phase: 'completed', finalBoundary: outcome.finalBoundary, admissionClosedMs: outcome.admissionClosedMs });

    const after = (await cluster.client.partition(id)).partition;
    expect(after.owner).toBe('n2');
    expect(after.followers).toContain('n1');
    expect(after.admission).toBe('open');
    expect(after.epoch).toBe(before.epoch + 1);
    expect(shape(after)).toEqual(shape(before));

    // No duplicate: the offsets every publish got are disjoint and in order, across the switch.
    const sorted = [...published].sort((a, b) => a.firstOffset - b.firstOffset);
    for (let i = 1; i < sorted.length; i++) expect(sorted[i]!.firstOffset).toBeGreaterThanOrEqual(sorted[i - 1]!.nextOffset);
    const fb = outcome.finalBoundary!;
    expect(sorted.some((p) => p.firstOffset < fb) && sorted.some((p) => p.firstOffset >= fb)).toBe(true);
    // No loss: the tail and the confirmed tail never went back, and every published offset ends up confirmed
    // and held by the new owner.
    for (let i = 1; i < samples.length; i++) {
      expect(samples[i]!.tail).toBeGreaterThanOrEqual(samples[i - 1]!.tail);
      expect(samples[i]!.confirmedTail).toBeGreaterThanOrEqual(samples[i - 1]!.confirmedTail);
    }
    const last = sorted.at(-1)!.nextOffset;
    const settled = await eventually('every publish confirmed', async () => {
      const p = await cluster.client.progress(id);
      return p.confirmedTail >= last ? p : undefined;
    });
    expect(settled.replicas.find((r) => r.node === 'n2')!.durableOffset).toBeGreaterThanOrEqual(last);
    expect((await cluster.client.invariants()).breaches).toEqual([]);
    console.log(`owner handoff q-220: admission closed ${outcome.admissionClosedMs} ms (workflow clock), final boundary ${outcome.finalBoundary}, ${published.length} publishes across the switch`);
    await replayAndKeep(client, handle.workflowId, 'owner-handoff');
  });
});

type Victim = 'A' | 'D' | 'F' | 'recovery' | 'refused';
const WRITES: GuardedWriteName[] = ['close-admission', 'commit-owner'];
const WHENS = ['before', 'after'] as const;
const VICTIMS: Victim[] = ['A', 'D', 'F', 'recovery', 'refused'];
const cases = WRITES.flatMap((write) => WHENS.flatMap((when) => VICTIMS.map((victim) => ({ write, when, victim }))));

/**
 * How each case ends. Before the commit (any fault before commit-owner is sent, or after close-admission) a
 * failure of A, D or a recovery ends the handoff and admission reopens (on A, or by the recovery's activation);
 * after the commit nothing stops it: recovery takes over. F failing never stops it, a refused write is retried.
 */
function expected(write: GuardedWriteName, when: 'before' | 'after', victim: Victim): string {
  const committed = write === 'commit-owner' && when === 'after';
  if (victim === 'F' || victim === 'refused' || committed) return 'completed';
  // A failing is an owner failure: the broker opens a recovery.
  return { A: 'aborted:pending_recovery', D: 'aborted:target_down', recovery: 'aborted:pending_recovery' }[victim];
}

describe('owner handoff: faults at every write boundary', () => {
  const outcomes: Record<string, string> = {};
  afterAll(() => console.log(`owner handoff write-boundary outcomes: ${JSON.stringify(outcomes)}`));

  it.each(cases.map((c, i) => ({ ...c, n: 200 + i })))('$victim fails $when $write', async ({ write, when, victim, n }) => {
    // Owners spread over the nodes, so one case's crashed node is not the next case's owner.
    const nodes = ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'];
    const k = n % 6;
    const [A, D, F] = [nodes[k]!, nodes[(k + 1) % 6]!, nodes[(k + 2) % 6]!];
    const before = await partitionOn(n, [A, D, F]);
    const id = before.id;
    const node = victim === 'A' ? A : victim === 'D' ? D : victim === 'F' ? F : null;
    const fault: Fault = node ? { fault: 'crash-node', node } : victim === 'recovery' ? { fault: 'fail-owner', partition: id } : { fault: 'refuse-next-write', partition: id };
    const a: Armed = { partition: id, write, when, faults: [fault], fired: false };
    armed = a;

    const handle = await startHandoff(ctx, request(id, A, D));
    const outcome = await healAfter(cluster.client, a, node, ended(handle));
    const got = outcome.status === 'aborted' ? `aborted:${outcome.code}` : outcome.status;
    outcomes[`${victim} ${when} ${write}`] = got;
    // Every injected fault fired: a case whose handoff ended before its write tests nothing.
    expect(a.fired).toBe(true);
    expect(got, outcome.status === 'aborted' ? outcome.reason : '').toBe(expected(write, when, victim));

    const after = await eventually('no pending recovery', async () => {
      const p = (await cluster.client.partition(id)).partition;
      return p.pendingRecovery === null ? p : undefined;
    });
    expect(after.admission).toBe('open');
    expect(shape(after)).toEqual(shape(before));
    expect(after.learners).toEqual([]);
    // After the commit D is the owner: D failing, or a recovery opened, is a recovery of D.
    const recoveredAfterCommit = write === 'commit-owner' && when === 'after' && (victim === 'D' || victim === 'recovery');
    if (outcome.status === 'completed') {
      expect(outcome.epoch).toBe(before.epoch + 1);
      if (recoveredAfterCommit) {
        // After the commit, recovery took over: it activated a later epoch and reopened admission.
        expect(outcome.note).toMatch(/a recovery opened after the commit/);
        expect(after.epoch).toBeGreaterThan(before.epoch + 1);
      } else {
        expect(after.owner).toBe(D);
        expect(after.followers).toContain(A);
        expect(after.epoch).toBe(before.epoch + 1);
      }
      if (victim === 'refused') expect((await handle.query(statusQuery)).retries).toBeGreaterThanOrEqual(1);
    } else if (victim === 'D') {
      // Nothing about who owns the partition changed; admission reopened on A.
      expect(after.owner).toBe(A);
      expect(after.epoch).toBe(before.epoch);
      expect(outcome.reason).toMatch(new RegExp(`${D} did not become the owner, admission (reopened on ${A}|was never closed)`));
    } else {
      // A recovery replaced the owner at epoch + 1; its activation reopened admission.
      expect(after.epoch).toBe(before.epoch + 1);
      expect(outcome.reason).toMatch(/opened on q-\d+ before the commit; .* did not become the owner, (admission was never closed|the recovery's activation \(epoch \d+, owner n\d\) reopened admission|admission reopened on n\d)/);
    }
    expect((await cluster.client.invariants()).breaches).toEqual([]);
  });
});

describe('owner handoff: cancel, stalls and quiet points', () => {
  it('cancel before the commit reopens admission on A; the outcome is cancelled', async () => {
    const before = await partitionOn(221, ['n1', 'n2', 'n3']);
    // F lags (its replication stalled): admission stays closed while the handoff waits for it at the final boundary.
    await cluster.client.fault({ fault: 'stall-transfer', partition: before.id, node: 'n3', stalled: true });
    const handle = await startHandoff(ctx, request(before.id, 'n1', 'n2', { quietPoint: { maxClosedMs: 120_000 } }));
    const waiting = await inPhase(handle, ['waiting_for_final_boundary'], (r) => r?.includes('waiting for n3 durable') ?? false);
    expect(waiting.finalBoundary).toEqual(expect.any(Number));
    expect((await cluster.client.partition(before.id)).partition.admission).toBe('closed');
    await cancelMove(client, before.id, 'changed my mind');
    const outcome = await ended(handle);
    expect(outcome).toMatchObject({ status: 'cancelled', reason: expect.stringMatching(/changed my mind; admission reopened on n1/) });
    const after = (await cluster.client.partition(before.id)).partition;
    expect(after).toMatchObject({ owner: 'n1', admission: 'open', epoch: before.epoch });
    expect(shape(after)).toEqual(shape(before));
    expect((await handle.query(statusQuery)).admissionClosedMs).toBeGreaterThan(0);
    await cluster.client.fault({ fault: 'stall-transfer', partition: before.id, node: 'n3', stalled: false });
    expect((await cluster.client.invariants()).breaches).toEqual([]);
  });

  it('a counted copy stalled past the bound: admission reopens on A and the handoff ends stalled', async () => {
    const before = await partitionOn(222, ['n2', 'n3', 'n4']);
    await cluster.client.fault({ fault: 'stall-transfer', partition: before.id, node: 'n4', stalled: true });
    const handle = await startHandoff(ctx, request(before.id, 'n2', 'n3', { quietPoint: { maxClosedMs: 1_500 } }));
    const outcome = await ended(handle);
    expect(outcome).toMatchObject({ status: 'aborted', code: 'stalled', reason: expect.stringMatching(/within 2s; n3 did not become the owner, admission reopened on n2/) });
    expect((await cluster.client.partition(before.id)).partition).toMatchObject({ owner: 'n2', admission: 'open', epoch: before.epoch });
    await replayAndKeep(client, handle.workflowId, 'owner-handoff-stalled');
    await cluster.client.fault({ fault: 'stall-transfer', partition: before.id, node: 'n4', stalled: false });
    expect((await cluster.client.invariants()).breaches).toEqual([]);
  });

  it('cancel after the commit is refused with the reason and the way on, and the handoff completes', async () => {
    const before = await partitionOn(223, ['n3', 'n4', 'n5']);
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let reached = false;
    // Hold the reopen write until the test has tried to cancel: the workflow knows the commit went through.
    armed = { partition: before.id, write: 'reopen-admission', when: 'before', faults: [], fired: false, hook: async () => {
      reached = true;
      await released;
    } };
    const handle = await startHandoff(ctx, request(before.id, 'n3', 'n4'));
    await eventually('the reopen write held', async () => (reached ? true : undefined));
    const refusal = await cancelMove(client, before.id, 'too late').catch((e: unknown) => e);
    release();
    expect(refusal).toBeInstanceOf(MoveRefused);
    expect((refusal as MoveRefused).message).toMatch(/refused: n4 already owns q-223 at epoch \d+ .*hand it off from n4 to n3/);
    expect(await ended(handle)).toMatchObject({ status: 'completed', from: 'n3', to: 'n4' });
    expect((await cluster.client.invariants()).breaches).toEqual([]);
  });

  it('no quiet point within the bound: admission closes anyway and the outcome says so', async () => {
    const before = await partitionOn(224, ['n4', 'n5', 'n6']);
    // 400 messages/s: every read finds messages in flight, never 0.
    await cluster.client.setRate(before.id, 400);
    const handle = await startHandoff(ctx, request(before.id, 'n4', 'n5', { quietPoint: { maxInFlight: 0, maxWaitMs: 1_000 } }));
    const outcome = await ended(handle);
    expect(outcome).toMatchObject({ status: 'completed', to: 'n5', note: expect.stringMatching(/no quiet point within 1s \(at most 0 messages in flight\): admission closed anyway/) });
    expect((await cluster.client.invariants()).breaches).toEqual([]);
  });
});

describe('owner handoff: the worker killed while admission is closed', () => {
  it('a new worker carries the handoff on from its history and it completes', async () => {
    const before = await partitionOn(226, ['n5', 'n6', 'n1']);
    const killQueue = `owner-handoff-kill-${process.pid}`;
    const env = { ...temporalEnv(), TEMPORAL_TASK_QUEUE: killQueue, CLUSTER_URL: cluster.url, DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'handoff-worker-')) };
    let worker = await spawnWorker(env);
    try {
      await cluster.client.fault({ fault: 'stall-transfer', partition: before.id, node: 'n1', stalled: true });
      const handle = await startHandoff({ ...ctx, taskQueue: killQueue }, request(before.id, 'n5', 'n6', { quietPoint: { maxClosedMs: 120_000 } }));
      await inPhase(handle, ['waiting_for_final_boundary']);
      await worker.kill9();
      worker = await spawnWorker(env);
      await cluster.client.fault({ fault: 'stall-transfer', partition: before.id, node: 'n1', stalled: false });
      const outcome = await ended(handle);
      expect(outcome).toMatchObject({ status: 'completed', from: 'n5', to: 'n6', epoch: before.epoch + 1 });
      expect((await cluster.client.partition(before.id)).partition).toMatchObject({ owner: 'n6', admission: 'open' });
      expect((await cluster.client.invariants()).breaches).toEqual([]);
      await replayAndKeep(client, handle.workflowId, 'owner-handoff-worker-killed');
    } finally {
      await worker.stop();
    }
  });
});

describe('owner handoff: bad input is refused before anything is written', () => {
  async function refusedWith(req: HandoffRequest, code: string, message: RegExp): Promise<void> {
    const generation = (await cluster.client.partition(req.partition)).partition.generation;
    const err = await startHandoff(ctx, req).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MoveRefused);
    expect((err as MoveRefused).code).toBe(code);
    expect((err as MoveRefused).message).toMatch(message);
    expect((await cluster.client.partition(req.partition)).partition.generation).toBe(generation);
  }

  it('a node that is not a replica, a learner, a lagging follower, a stream', async () => {
    const p = await partitionOn(225, ['n1', 'n2', 'n3']);
    await refusedWith(request(p.id, 'n1', 'n4'), 'not_a_follower', /n4 is not a replica of q-225, not a follower: a handoff of q-225 accepts n2, n3/);
    await refusedWith(request(p.id, 'n2', 'n3'), 'not_the_owner', /n2 does not own q-225 \(its owner is n1\)/);
    // A learner whose transfer is stalled stays a learner.
    await cluster.client.fault({ fault: 'stall-transfer', partition: p.id, node: 'n4', stalled: true });
    const added = await cluster.client.write(p.id, 'add-learner', { node: 'n4', expectedGeneration: p.generation, idempotencyKey: `learner-${process.pid}` });
    expect(added.ok).toBe(true);
    await refusedWith(request(p.id, 'n1', 'n4'), 'not_a_follower', /n4 is a learner of q-225, not a follower/);
    const g = (await cluster.client.partition(p.id)).partition.generation;
    expect((await cluster.client.write(p.id, 'drop-learner', { node: 'n4', expectedGeneration: g, idempotencyKey: `drop-${process.pid}` })).ok).toBe(true);
    await cluster.client.fault({ fault: 'stall-transfer', partition: p.id, node: 'n4', stalled: false });
    // A follower whose replication is stalled falls behind the tail.
    await cluster.client.fault({ fault: 'stall-transfer', partition: p.id, node: 'n3', stalled: true });
    await eventually('n3 behind', async () => ((await cluster.client.progress(p.id)).replicas.find((r) => r.node === 'n3')?.phase === 'tail' ? true : undefined));
    await refusedWith(request(p.id, 'n1', 'n3'), 'not_caught_up', /n3 is a follower of q-225 but not caught up: durable at \d+, the tail is \d+: a handoff of q-225 accepts n2/);
    await cluster.client.fault({ fault: 'stall-transfer', partition: p.id, node: 'n3', stalled: false });
    const stream = await partitionOn(229, ['n1', 'n2', 'n3'], 'stream');
    await refusedWith(request(stream.id, 'n1', 'n2'), 'not_a_queue', /q-229 is a stream/);
  });

  it('a second reconfiguration while one runs: Temporal refuses it, naming the running one', async () => {
    const id = 'q-225';
    const { partition: p } = await cluster.client.partition(id);
    await cluster.client.setRate(id, 400);
    // Never quiet and a long bound: the first handoff waits for its quiet point, having written nothing, so
    // only Temporal's one-workflow-per-id stands in the way of the second.
    const first = await startHandoff(ctx, request(id, p.owner, p.followers[0]!, { quietPoint: { maxInFlight: 0, maxWaitMs: 120_000 } }));
    await inPhase(first, ['waiting_for_quiet_point']);
    const running = /a reconfiguration of q-225 is already running: workflow reconfigure-q-225 \(owner-handoff n1 -> n2, phase waiting_for_quiet_point\)/;
    const again = await startHandoff(ctx, request(id, p.owner, p.followers[1]!)).catch((e: unknown) => e);
    expect(again).toMatchObject({ code: 'reconfiguration_running', message: expect.stringMatching(running) });
    const move = await startFollowerMove(ctx, { partition: id, from: p.followers[1]!, to: 'n5', origin: 'operator' }).catch((e: unknown) => e);
    expect(move).toMatchObject({ code: 'reconfiguration_running', message: expect.stringMatching(running) });
    await cancelMove(client, id, 'test over');
    expect(await ended(first)).toMatchObject({ status: 'cancelled', reason: expect.stringMatching(/test over; admission was never closed/) });
    await cluster.client.setRate(id, 50);
    expect((await cluster.client.partition(id)).partition).toMatchObject({ owner: 'n1', admission: 'open', generation: p.generation });
  });
});
