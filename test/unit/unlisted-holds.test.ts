/**
 * A tick waits for Temporal's lists only as long as its reads of the broker take (operations/closed.ts
 * `listedWithin`): on a dev server busy with 1,000 moves a list took 50-700 ms where the broker answered in 60. What
 * it then plans without must not be undone or lost: a partition whose record changed since the newest list began is
 * held for the tick (operations/unlisted.ts), and a move's end the list brings after the tick wakes the workflow.
 * Visibility and the broker are stand-ins here; the activities are the worker's own.
 */
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { createRebalancerActivities, type Snapshot } from '../../activities/rebalancer';
import type { Topology } from '../../cluster/contract';
import { changedBetween } from '../../operations/unlisted';
import { planNow } from '../../planner';
import { DEFAULT_PLANNER_CONFIG } from '../../planner/config';
import type { PlanInput } from '../../planner/types';
import type { TrackedMove } from '../../rules/definitions';
import { PartitionKey, SourceKey, TargetKey } from '../../rules/search-attributes';
import { node, partition, topology } from './planner-topology';

interface Close {
  partition: string;
  runId: string;
  from: string;
  to: string;
  closedAt: number;
}

/** Visibility whose lists of closes wait for `slow` while it is set; the runs in progress are listed at once. */
function temporal(running: string[]) {
  const closes: Close[] = [];
  const signals: { workflowId: string; args: unknown[] }[] = [];
  let slow: Promise<void> | null = null;
  let failing = false;
  const client = {
    workflow: {
      list: ({ query }: { query: string }) => {
        const inProgress = query.includes('ExecutionStatus = "Running"') && !query.includes('RebalancePhase');
        const gate = inProgress ? null : slow;
        return (async function* () {
          if (gate) await gate;
          if (gate && failing) throw new Error('visibility unavailable');
          if (inProgress) {
            yield* running.map((runId) => ({ runId, raw: {} }));
            return;
          }
          for (const c of closes)
            yield {
              workflowId: `reconfigure-${c.partition}`,
              runId: c.runId,
              closeTime: new Date(c.closedAt),
              raw: {},
              typedSearchAttributes: { get: (k: unknown) => (k === PartitionKey ? c.partition : k === SourceKey ? c.from : k === TargetKey ? c.to : undefined) },
            };
        })();
      },
      getHandle: (workflowId: string) => ({
        // A closed move, as Temporal describes it after the `outcome-memo` patch.
        describe: () => {
          const c = closes.find((x) => `reconfigure-${x.partition}` === workflowId)!;
          return Promise.resolve({ runId: c.runId, status: { name: 'COMPLETED' }, raw: { workflowExecutionInfo: {} }, memo: { outcome: { status: 'completed' } } });
        },
        signal: (...args: unknown[]) => {
          signals.push({ workflowId, args });
          return Promise.resolve();
        },
      }),
    },
  } as unknown as Client;
  return {
    client,
    closes,
    signals,
    /** Lists answer only once the returned function is called, and then fail when `fail`. */
    slowDown(fail = false): () => void {
      let release!: () => void;
      slow = new Promise<void>((r) => (release = r));
      failing = fail;
      return () => {
        slow = null;
        release();
      };
    },
  };
}

const NODES = ['n1', 'n2', 'n3', 'n4'].map((id) => node(id));
const AT_REST = topology(NODES, [partition('q-a', 'n1', ['n2', 'n3']), partition('q-b', 'n2', ['n3', 'n4']), partition('q-c', 'n3', ['n4', 'n1'])]);
/** An operator's move of q-a's copy n3 -> n4 completed: its record's generation rose. */
const MOVED: Topology = { ...AT_REST, generation: 2, partitions: AT_REST.partitions.map((p) => (p.id === 'q-a' ? { ...p, followers: ['n2', 'n4'], generation: 2 } : p)) };

function loop(running: string[] = []) {
  const t = temporal(running);
  let current = AT_REST;
  const planned: PlanInput['cooldowns'][] = [];
  const activities = createRebalancerActivities({
    cluster: { topology: () => Promise.resolve(current), syncBudget: () => Promise.resolve({ perNodeLimit: 2, clusterLimit: 8, clusterInUse: 0, nodes: [], transfers: [] }) },
    client: t.client,
    setDraining: () => Promise.resolve(),
    plan: (input, config) => (planned.push(input.cooldowns), planNow(input, config)),
  });
  const env = new MockActivityEnvironment({ taskQueue: 'rebalancer-q' });
  const config = DEFAULT_PLANNER_CONFIG;
  return {
    ...t,
    planned,
    setTopology: (next: Topology) => (current = next),
    async tick(tracked: TrackedMove[] = []) {
      const snapshot = (await env.run(activities.rebalancerSnapshot, tracked, null, Date.now() - 60_000, config.partitionCooldownMs)) as Snapshot;
      await env.run(activities.planMoves, { inFlight: snapshot.inFlight, cooldowns: { nodes: {}, partitions: {} }, now: Date.now(), cooled: true }, config);
      return { snapshot, cooldowns: planned.at(-1)! };
    },
  };
}

const heldNow = (cooldowns: PlanInput['cooldowns']) => Object.keys(cooldowns.partitions).filter((id) => cooldowns.partitions[id]! > Date.now() - 1_000);

describe('a tick that goes on without the list of closes', () => {
  it("holds the partition an operator's move changed since the list began, and cools it once the list comes", async () => {
    const l = loop();
    expect(heldNow((await l.tick()).cooldowns)).toEqual([]);
    const release = l.slowDown();
    l.setTopology(MOVED);
    l.closes.push({ partition: 'q-a', runId: 'op-1', from: 'n3', to: 'n4', closedAt: Date.now() });
    const started = Date.now();
    const blind = await l.tick();
    // The tick did not wait for the list, and planned with q-a held, the others free.
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(blind.snapshot.closed).toEqual([]);
    expect(heldNow(blind.cooldowns)).toEqual(['q-a']);
    expect(blind.cooldowns.moves?.['q-a']).toBeUndefined();
    release();
    const after = await l.tick();
    expect(after.snapshot.closed?.map((c) => c.partition)).toEqual(['q-a']);
    expect(after.cooldowns.moves?.['q-a']).toContainEqual({ from: 'n3', to: 'n4', until: expect.any(Number) });
    expect(heldNow(after.cooldowns)).toEqual([]);
  });

  it('wakes the workflow when the list brings the end of a move it tracks after the tick went on', async () => {
    const move: TrackedMove = { partition: 'q-b', op: 'follower_move', from: 'n3', to: 'n1', workflowId: 'reconfigure-q-b', runId: 'r-1', startedAt: Date.now() - 60_000, bytes: 0, reason: 'test' };
    const l = loop(['r-1']);
    await l.tick([move]);
    const release = l.slowDown();
    l.closes.push({ partition: 'q-b', runId: 'r-1', from: 'n3', to: 'n1', closedAt: Date.now() });
    const blind = await l.tick([move]);
    expect(blind.snapshot.ended).toEqual([]);
    expect(blind.snapshot.inFlight.map((m) => m.partition)).toEqual(['q-b']);
    expect(l.signals).toEqual([]);
    release();
    await new Promise((r) => setTimeout(r, 50));
    expect(l.signals).toEqual([{ workflowId: 'test', args: [expect.objectContaining({ name: 'topology' }), { event: 'assignment_changed', partition: 'q-b', seq: 0 }] }]);
  });

  it('a list that fails after the tick went on is made again by the next tick, and wakes nothing', async () => {
    const move: TrackedMove = { partition: 'q-b', op: 'follower_move', from: 'n3', to: 'n1', workflowId: 'reconfigure-q-b', runId: 'r-1', startedAt: Date.now() - 60_000, bytes: 0, reason: 'test' };
    const l = loop(['r-1']);
    await l.tick([move]);
    const release = l.slowDown(true);
    l.closes.push({ partition: 'q-b', runId: 'r-1', from: 'n3', to: 'n1', closedAt: Date.now() });
    expect((await l.tick([move])).snapshot.ended).toEqual([]);
    release();
    await new Promise((r) => setTimeout(r, 50));
    expect(l.signals).toEqual([]);
    // The next tick lists again, and the move's end is found.
    expect(l.closes).toHaveLength(1);
    const again = await l.tick([move]);
    expect(again.snapshot.ended).toEqual([{ workflowId: 'reconfigure-q-b', runId: 'r-1', status: 'completed', detail: null }]);
    expect(again.snapshot.inFlight).toEqual([]);
  });
});

describe('the partitions changed between two topologies', () => {
  it('are those whose record generation differs, whatever the order, with those created', () => {
    const created = partition('q-d', 'n4', ['n1', 'n2']);
    const reordered: Topology = { ...MOVED, partitions: [created, ...[...MOVED.partitions].reverse()] };
    expect(changedBetween(AT_REST, AT_REST)).toEqual([]);
    expect(changedBetween(AT_REST, MOVED)).toEqual(['q-a']);
    expect(changedBetween(AT_REST, reordered).sort()).toEqual(['q-a', 'q-d']);
  });
});
