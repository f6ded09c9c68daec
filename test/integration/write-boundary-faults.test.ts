/**
 * Faults at every write boundary of a follower move: for each guarded write, the owner, R or T fails, or a
 * recovery opens, just before or just after it. The activities' broker client is wrapped to fire the fault
 * at that exact point. Every case ends completed or cleanly aborted, with a consistent assignment and zero
 * invariant breaches; crashed nodes come back a little later, as they would in life.
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelMove, MoveRefused, startFollowerMove, type MovesContext } from '../../operations/moves';
import { statusQuery } from '../../rules/definitions';
import type { Fault, GuardedWriteName } from '../../cluster/contract';
import { eventually, outcomeOf, pickMove, replayAndKeep, startSuite, type TestCluster } from './helpers';
import { armFault, healAfter, type Armed } from './write-faults';

type Victim = 'owner' | 'R' | 'T' | 'recovery';
type When = 'before' | 'after';
const WRITES: GuardedWriteName[] = ['add-learner', 'swap', 'remove-leaving'];
const VICTIMS: Victim[] = ['owner', 'R', 'T', 'recovery'];
const WHENS: When[] = ['before', 'after'];

let cluster: TestCluster;
let client: Client;
let ctx: MovesContext;
let stop: (() => Promise<void>) | undefined;
let armed: Armed | null = null;
const outcomes: Record<string, string> = {};
const taskQueue = `boundary-faults-${process.pid}`;

beforeAll(async () => {
  ({ cluster, client, ctx, stop } = await startSuite(taskQueue, { shape: { nodes: 8, partitions: WRITES.length * VICTIMS.length * WHENS.length + 2, streams: 0 }, wrap: (real) => armFault(real, () => armed) }));
});

afterAll(async () => {
  console.log(`write-boundary fault outcomes: ${JSON.stringify(outcomes)}`);
  await stop?.();
});

const cases = WRITES.flatMap((write) => WHENS.flatMap((when) => VICTIMS.map((victim) => ({ write, when, victim }))));

/**
 * How each case ends: `completed`, or `aborted:<code>`. `rWon`: the recovery a failed owner causes made R the
 * new owner (the most durable survivor, ties broken by name), after which a follower move of R no longer applies.
 */
function expectedOutcome(write: GuardedWriteName, when: When, victim: Victim, rWon: boolean): string {
  // Losing R never stops a move, and past the swap the move always finishes.
  if (victim === 'R' || write === 'remove-leaving' || (write === 'swap' && when === 'after')) return 'completed';
  if (victim === 'T') {
    // Down before add-learner: never added. Down later, before the swap: a failed target never starts to count.
    return write === 'add-learner' && when === 'before' ? 'aborted:node_down' : 'aborted:target_down';
  }
  return rWon ? 'aborted:not_a_follower' : 'completed';
}

describe('faults at every write boundary of a follower move', () => {
  it.each(cases.map((c, i) => ({ ...c, partition: `q-${i}` })))(
    '$victim fails $when $write',
    async ({ write, when, victim, partition }) => {
      const { to } = await pickMove(cluster.client, partition);
      const before = (await cluster.client.partition(partition)).partition;
      // R: a follower a recovery does not make owner when durability ties (ties go to the first name), so a
      // failed owner usually leads to the retry under the new epoch rather than to "no longer a follower".
      const from = [...before.followers].sort().at(-1)!;
      const node = victim === 'owner' ? before.owner : victim === 'R' ? from : victim === 'T' ? to : null;
      const fault: Fault = node ? { fault: 'crash-node', node } : { fault: 'fail-owner', partition };
      armed = { partition, write, when, faults: [fault], fired: false };

      const a = armed;
      const handle = await startFollowerMove(ctx, { partition, from, to, origin: 'operator', timing: { pollMs: 500, retryMs: 300 } });
      const outcome = await healAfter(cluster.client, a, node, outcomeOf(handle));
      const got = outcome.status === 'aborted' ? `aborted:${outcome.code}` : outcome.status;
      outcomes[`${victim} ${when} ${write}`] = got;
      // Every injected fault fired: a case whose move ended before its write tests nothing.
      expect(a.fired).toBe(true);

      const after = await eventually('no pending recovery', async () => {
        const p = (await cluster.client.partition(partition)).partition;
        return p.pendingRecovery === null ? p : undefined;
      });
      // A fault after a write the broker refused (and the move retried) is a fault before the write that counted.
      expect(got).toBe(expectedOutcome(write, a.accepted === false ? 'before' : when, victim, after.owner === from));
      expect(after.writeRequirement).toBe(before.writeRequirement);
      expect(after.learners).toEqual([]);
      expect(after.leaving).toBeNull();
      if (outcome.status === 'completed') {
        expect([after.owner, ...after.followers]).toContain(to);
        expect([after.owner, ...after.followers]).not.toContain(from);
        expect(after.history.map((h) => h.node)).not.toContain(from);
      } else {
        expect([after.owner, ...after.followers]).toContain(from);
        expect([after.owner, ...after.followers]).not.toContain(to);
      }
      expect((await cluster.client.invariants()).breaches).toEqual([]);
    },
  );
});

describe('operator cancel after the swap', () => {
  it('is refused with the reason and the way forward, and the move still finishes', async () => {
    const partition = `q-${cases.length}`;
    const { from, to } = await pickMove(cluster.client, partition);
    // T crashes right after the swap and its disk is lost, so it is below B until it has copied again.
    armed = { partition, write: 'swap', when: 'after', faults: [{ fault: 'crash-node', node: to }, { fault: 'lose-disk', node: to }], fired: false };
    const handle = await startFollowerMove(ctx, { partition, from, to, origin: 'operator', timing: { pollMs: 500 } });
    await eventually('T down after the swap', async () => {
      const s = await handle.query(statusQuery);
      return s.phase === 'covering_boundary' && s.blockingReason?.includes('down after the swap') ? s : undefined;
    });
    // While T is down a cancel swaps back (swap-back.test.ts); back up but held below B, T makes it refused.
    await cluster.client.fault({ fault: 'stall-transfer', partition, node: to, stalled: true });
    await cluster.client.fault({ fault: 'restart-node', node: to });
    await eventually('T up again, below B', async () => {
      const s = await handle.query(statusQuery);
      return s.blockingReason?.startsWith(`waiting for ${to} durable at`) ? s : undefined;
    });
    const refusal = await cancelMove(client, partition, 'too late').catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(MoveRefused);
    expect((refusal as MoveRefused).message).toMatch(new RegExp(`already counts ${to} instead of ${from}.*will finish by removing ${from}`));
    await cluster.client.fault({ fault: 'stall-transfer', partition, node: to, stalled: false });
    expect(await outcomeOf(handle)).toMatchObject({ status: 'completed' });
    expect((await cluster.client.invariants()).breaches).toEqual([]);
    await replayAndKeep(client, handle.workflowId, 'v3-target-lost-after-swap');
  });
});

describe('T down after the swap', () => {
  it('R stays until T returns: the move waits with the reason, then finishes', async () => {
    const partition = `q-${cases.length + 1}`;
    const { from, to } = await pickMove(cluster.client, partition);
    // T crashes just before the removal, after it covered B: removing R now would leave too few live copies.
    const a: Armed = { partition, write: 'remove-leaving', when: 'before', faults: [{ fault: 'crash-node', node: to }], fired: false };
    armed = a;
    const handle = await startFollowerMove(ctx, { partition, from, to, origin: 'operator', timing: { pollMs: 500, retryMs: 300 } });
    const waiting = await eventually('the move waiting for T', async () => {
      const s = await handle.query(statusQuery);
      return a.fired && s.blockingReason?.includes('is down after the swap') ? s : undefined;
    });
    expect(waiting.blockingReason).toBe(
      `${to} is down after the swap: ${from} stays eligible and keeps its data; waiting for ${to} to return or for the swap back after 600s down (a cancel swaps back at once)`,
    );
    const held = (await cluster.client.partition(partition)).partition;
    expect(held.leaving).toBe(from);
    expect(held.history.map((h) => h.node)).toContain(from);
    await cluster.client.fault({ fault: 'restart-node', node: to });
    expect(await outcomeOf(handle)).toMatchObject({ status: 'completed', from, to });
    expect((await cluster.client.invariants()).breaches).toEqual([]);
  });
});
