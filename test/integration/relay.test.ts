/**
 * The progress relay with two workers on one task queue, on a real dev server and an in-process reference
 * cluster. Signals are counted where they land: in the histories of stand-in workflows started on a task queue
 * nobody polls, so they stay running and only collect signals: moves (`reconfigure-<p>`), the rebalancer of the
 * relay's broker and task queue, and the drains of the failing nodes. One relay runs per broker, every event is
 * signalled once, a node's signals and each target's topology signals keep feed order, a worker stopped
 * mid-page loses nothing (the other worker resumes from the last heartbeat), and so does a worker process
 * killed with SIGKILL.
 */
import os from 'node:os';
import { Context } from '@temporalio/activity';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RelayPage, SentSignal } from '../../activities/relay';
import type { ClusterEvent } from '../../cluster/contract';
import { ensureRelay, relayScope } from '../../operations/relay';
import { createRebalancerWorker, type RebalancerWorker } from '../../worker/worker';
import { drainWorkflowId, rebalancerWorkflowId, WORKFLOW_TYPE } from '../../rules/definitions';
import { SourceKey, TargetKey } from '../../rules/search-attributes';
import { connectClient, eventually, logger, replayAndKeep, startTestCluster, temporalAddress, temporalEnv, temporalNamespace, TEST_RELAY_TUNING, type TestCluster } from './helpers';
import { spawnWorker, type Child } from './processes';

// The dev server and its visibility are shared with other test files, whose clusters have at most 6 nodes and
// partitions: events here touch only nodes and partitions beyond those, so no other file's moves are signalled.
const SHAPE = { nodes: 12, partitions: 24, streams: 0 };
const FAILING = ['n9', 'n12'];
const SIGNALS_COUNTED = new Set(['admitted', 'recovery', 'node', 'topology']);
/** Node and recovery events, which the relay forwards to the rebalancer (and a node's to its drain). */
const TOPOLOGY_EVENTS = new Set(['node_joined', 'node_up', 'node_down', 'node_draining', 'recovery_opened', 'recovery_activated']);

interface RelayWorker {
  name: string;
  w: RebalancerWorker;
  running: Promise<void>;
  sent: SentSignal[];
}

let cluster: TestCluster;
let client: Client;
let workers: RelayWorker[] = [];
/** Stand-ins for the moves of the failing nodes' partitions (they get node signals through visibility). */
let moveSinks: WorkflowHandle[] = [];
/** Stand-ins for the rebalancer and the failing nodes' drains. */
let topologySinks: WorkflowHandle[] = [];
let sinks: WorkflowHandle[] = [];
let relayId = '';
const taskQueue = `relay-${process.pid}`;
/** Test 1 slows each node and topology signal down, so a relay that sent one target's events concurrently would reorder them. */
let slowNodeSignals = false;
/** Test 2: the first worker that sends the third signal of a page of two events or more stops there (a node event is a dozen signals). */
let stopMidPage = false;
let crashed: { worker: string; page: RelayPage; survivorSent: number } | null = null;

async function startRelayWorker(name: string): Promise<RelayWorker> {
  const me = { name, sent: [] as SentSignal[] } as RelayWorker;
  me.w = await createRebalancerWorker({
    temporal: { address: temporalAddress(), namespace: temporalNamespace(), taskQueue },
    clusterUrl: cluster.url,
    logger,
    // Long runs: a successor resuming from the run's start instead of where delivery stood would repeat test 1's signals.
    relayTuning: { ...TEST_RELAY_TUNING, runMs: 10 * 60_000 },
    relayAfterSignal: async (sent) => {
      me.sent.push(sent);
      if (slowNodeSignals && (sent.signal === 'node' || sent.signal === 'topology')) await new Promise((r) => setTimeout(r, 50));
      if (stopMidPage && sent.page.events >= 2 && sent.inPage === 3 && !crashed) {
        crashed = { worker: name, page: sent.page, survivorSent: workers.find((x) => x.name !== name)!.sent.length };
        me.w.shutdown();
        // The shutdown cancels this run here, mid-page: the rest of the page is never sent by this worker.
        await Context.current().cancelled;
      }
    },
  });
  me.running = me.w.run();
  return me;
}

/** Canonical JSON, so a payload compares equal whatever order its keys were written in. */
function canon(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canon).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.entries(value).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${JSON.stringify(k)}:${canon(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

async function feed(): Promise<ClusterEvent[]> {
  const events: ClusterEvent[] = [];
  for (let cursor = 0; ;) {
    const page = await cluster.client.events(cursor, { limit: 10_000 });
    if (page.events.length === 0) return events;
    events.push(...page.events);
    cursor = page.cursor;
  }
}

/** The signals each event must cause, keyed `workflowId|signal|payload`, with the event's seq. */
function expectedSignals(events: ClusterEvent[]): Map<string, number> {
  const out = new Map<string, number>();
  const ids = new Set(sinks.map((s) => s.workflowId));
  const moves = new Set(moveSinks.map((s) => s.workflowId));
  const rebalancer = topologySinks[0]!.workflowId;
  for (const e of events) {
    const add = (workflowId: string, signal: string, payload: unknown) => {
      if (ids.has(workflowId)) out.set(`${workflowId}|${signal}|${canon(payload)}`, e.seq);
    };
    const move = 'partition' in e ? `reconfigure-${e.partition}` : '';
    if (e.type === 'admitted') add(move, 'admitted', { node: e.node, generation: e.generation });
    if (e.type === 'recovery_opened') add(move, 'recovery', { state: 'opened', epoch: e.epoch });
    if (e.type === 'recovery_activated') add(move, 'recovery', { state: 'activated', epoch: e.epoch, owner: e.owner, generation: e.generation });
    if ((e.type === 'node_down' || e.type === 'node_up') && FAILING.includes(e.node)) {
      for (const id of moves) add(id, 'node', { node: e.node, live: e.type === 'node_up', seq: e.seq });
    }
    if (TOPOLOGY_EVENTS.has(e.type)) {
      const about = 'node' in e ? { node: e.node } : { partition: (e as { partition: string }).partition };
      const signal = { event: e.type, ...about, seq: e.seq };
      add(rebalancer, 'topology', signal);
      if ('node' in e) add(drainWorkflowId(e.node), 'topology', signal);
    }
  }
  return out;
}

interface Received {
  counts: Map<string, number>;
  /** Per stand-in and node, the seq of each node signal in the order they arrived. */
  nodeOrder: Map<string, number[]>;
  /** Per stand-in, the seq of each topology signal in the order they arrived. */
  topologyOrder: Map<string, number[]>;
  progress: Map<string, number>;
}

async function receivedSignals(): Promise<Received> {
  const received: Received = { counts: new Map(), nodeOrder: new Map(), topologyOrder: new Map(), progress: new Map() };
  for (const sink of sinks) {
    const history = await sink.fetchHistory();
    for (const event of history.events ?? []) {
      const attrs = event.workflowExecutionSignaledEventAttributes;
      if (!attrs) continue;
      const payload = defaultPayloadConverter.fromPayload<Record<string, unknown>>(attrs.input!.payloads![0]!);
      if (attrs.signalName === 'progress') received.progress.set(sink.workflowId, (received.progress.get(sink.workflowId) ?? 0) + 1);
      if (!SIGNALS_COUNTED.has(attrs.signalName!)) continue;
      const key = `${sink.workflowId}|${attrs.signalName}|${canon(payload)}`;
      received.counts.set(key, (received.counts.get(key) ?? 0) + 1);
      if (attrs.signalName === 'node') {
        const order = `${sink.workflowId}|${String(payload.node)}`;
        received.nodeOrder.set(order, [...(received.nodeOrder.get(order) ?? []), payload.seq as number]);
      }
      if (attrs.signalName === 'topology') {
        received.topologyOrder.set(sink.workflowId, [...(received.topologyOrder.get(sink.workflowId) ?? []), payload.seq as number]);
      }
    }
  }
  return received;
}

async function relayRun() {
  const description = await client.workflow.getHandle(relayId).describe();
  return description.raw.pendingActivities?.[0];
}

/** The relay's cursor as last heartbeated by its running activity. */
async function relayCursor(): Promise<number> {
  const details = (await relayRun())?.heartbeatDetails?.payloads?.[0];
  return details ? defaultPayloadConverter.fromPayload<number>(details) : -1;
}

/** Wait until the failing nodes' partitions are settled and the relay has heartbeated past the whole feed. */
async function settledFeed(): Promise<ClusterEvent[]> {
  await eventually('partitions settled after the faults', async () => {
    const topology = await cluster.client.topology();
    const busy = topology.partitions.filter((p) => touched.includes(p.id) && (p.pendingRecovery || p.learners.length > 0));
    return busy.length === 0 && topology.nodes.every((n) => n.live) ? true : undefined;
  });
  const events = await eventually('the feed to go quiet', async () => {
    const before = await feed();
    await new Promise((r) => setTimeout(r, 1_000));
    const after = await feed();
    return after.length === before.length ? after : undefined;
  });
  const end = events.at(-1)!.seq;
  await eventually(`the relay to heartbeat past seq ${end}`, async () => ((await relayCursor()) >= end ? true : undefined));
  return events;
}

let joined = 0;

/**
 * Crash and restart the failing nodes with the feed held back, so their events come out as one page; before
 * that a node joins and the first failing node's draining mark flips, for the rebalancer's other events.
 */
async function failNodes(restart: boolean): Promise<void> {
  const before = (await feed()).at(-1)?.seq ?? 0;
  await cluster.client.fault({ fault: 'delay-events', ms: 1_500 });
  joined += 1;
  await cluster.client.joinNode(`n${SHAPE.nodes + joined}`);
  const first = (await cluster.client.nodes()).nodes.find((n) => n.id === FAILING[0])!;
  await cluster.client.setDraining(first.id, !first.draining, 'relay test');
  for (const node of FAILING) await cluster.client.fault({ fault: 'crash-node', node });
  if (restart) for (const node of FAILING) await cluster.client.fault({ fault: 'restart-node', node });
  const last = restart ? 'node_up' : 'node_down';
  await eventually('the held-back events to be readable', async () =>
    (await feed()).some((e) => e.seq > before && e.type === last && e.node === FAILING.at(-1)) ? true : undefined,
  );
}

let touched: string[] = [];

/** A fresh cluster, stand-ins for the moves of every partition the failing nodes hold, for the rebalancer and the drains. */
async function setUpScene(queue: string): Promise<void> {
  cluster = await startTestCluster({}, SHAPE);
  client ??= await connectClient();
  const topology = await cluster.client.topology();
  touched = topology.partitions
    .filter((p) => [p.owner, ...p.followers].some((n) => FAILING.includes(n)))
    .map((p) => p.id);
  // Guard the premise of the isolation comment above.
  expect(touched.every((id) => Number(id.slice(2)) >= 6)).toBe(true);
  moveSinks = await Promise.all(
    touched.map((partition) =>
      client.workflow.start(WORKFLOW_TYPE['follower-move'], {
        taskQueue: `relay-${process.pid}-nobody-polls`,
        workflowId: `reconfigure-${partition}`,
        args: [{ partition, from: 'n9', to: 'n12', origin: 'operator' }],
        typedSearchAttributes: [
          { key: SourceKey, value: 'n9' },
          { key: TargetKey, value: 'n12' },
        ],
      }),
    ),
  );
  const standIn = (workflowId: string) =>
    client.workflow.start('topologyStandIn', { taskQueue: `relay-${process.pid}-nobody-polls`, workflowId });
  const scope = relayScope(cluster.client.baseUrl, queue);
  topologySinks = await Promise.all([rebalancerWorkflowId(scope), ...FAILING.map(drainWorkflowId)].map(standIn));
  sinks = [...moveSinks, ...topologySinks];
  await eventually('stand-ins visible to the relay', async () => {
    let n = 0;
    for await (const _ of client.workflow.list({ query: `ExecutionStatus = "Running" AND ${SourceKey.name} = "n9"` })) n += 1;
    return n === moveSinks.length ? true : undefined;
  });
}

async function tearDownScene(): Promise<void> {
  await Promise.all(sinks.map((s) => s.terminate('relay test done').catch(() => undefined)));
  await client?.workflow.getHandle(relayId).terminate('relay test done').catch(() => undefined);
  await cluster?.close();
}

describe('the progress relay with two workers', () => {
  beforeAll(async () => {
    await setUpScene(taskQueue);
    workers = [await startRelayWorker('a'), await startRelayWorker('b')];
    relayId = workers[0]!.w.relayWorkflowId;
  });
  afterAll(async () => {
    for (const { w, running } of workers) {
      w.shutdown();
      await running;
    }
    await tearDownScene();
  });

  it('runs once per broker and task queue and signals each event once, a node\'s events in feed order', async () => {
    expect(workers[0]!.w.relayWorkflowId).toBe(workers[1]!.w.relayWorkflowId);
    let relays = 0;
    for await (const _ of client.workflow.list({ query: `WorkflowType = "progressRelay" AND WorkflowId = "${workers[0]!.w.relayWorkflowId}"` })) relays += 1;
    expect(relays).toBe(1);

    slowNodeSignals = true;
    await failNodes(true);
    const events = await settledFeed();
    slowNodeSignals = false;

    const expected = expectedSignals(events);
    expect(new Set([...expected.keys()].map((k) => k.split('|')[1]))).toEqual(SIGNALS_COUNTED);
    const received = await receivedSignals();
    expect(Object.fromEntries(received.counts)).toEqual(Object.fromEntries([...expected.keys()].map((k) => [k, 1])));
    // The held-back feed came out as one page, so a down and an up of one node were sent from one page...
    const nodeSeqs = events.filter((e) => (e.type === 'node_down' || e.type === 'node_up') && FAILING.includes(e.node)).map((e) => e.seq);
    const pages = workers.flatMap((x) => x.sent.map((sent) => sent.page));
    expect(pages.some((p) => nodeSeqs.every((seq) => seq > p.after && seq <= p.after + p.events))).toBe(true);
    // ...and still arrived in feed order.
    expect(received.nodeOrder.size).toBe(moveSinks.length * FAILING.length);
    for (const seqs of received.nodeOrder.values()) expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    // The rebalancer and each drain hear their events in feed order too, every kind of them.
    expect(received.topologyOrder.size).toBe(topologySinks.length);
    for (const seqs of received.topologyOrder.values()) expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    const kinds = [...expected.keys()].filter((k) => k.startsWith(`${topologySinks[0]!.workflowId}|`)).map((k) => JSON.parse(k.split('|')[2]!).event);
    expect(new Set(kinds)).toEqual(TOPOLOGY_EVENTS);
    // Coalescing never multiplies progress.
    for (const sink of sinks) {
      const partition = sink.workflowId.replace('reconfigure-', '');
      const published = events.filter((e) => e.type === 'progress' && e.partition === partition).length;
      expect(received.progress.get(sink.workflowId) ?? 0).toBeLessThanOrEqual(published);
    }
  });

  it('loses nothing when the worker running the relay stops mid-page: the other worker delivers the page again', async () => {
    const before = (await feed()).at(-1)?.seq ?? 0;
    await eventually('the relay to heartbeat its cursor', async () => ((await relayCursor()) >= before ? true : undefined));
    stopMidPage = true;
    await failNodes(false);
    const stopped = await eventually('a worker stopped mid-page', async () => crashed ?? undefined);
    stopMidPage = false;
    const victim = workers.find((x) => x.name === stopped.worker)!;
    const survivor = workers.find((x) => x.name !== stopped.worker)!;
    await victim.running;
    for (const node of FAILING) await cluster.client.fault({ fault: 'restart-node', node });
    const events = await settledFeed();

    const crashPage = new Set(events.filter((e) => e.seq > stopped.page.after).slice(0, stopped.page.events).map((e) => e.seq));
    const expected = expectedSignals(events);
    const received = await receivedSignals();
    expect([...received.counts.keys()].sort()).toEqual([...expected.keys()].sort());
    for (const [key, seq] of expected) {
      // The stopped page goes out again in full; every other page exactly once.
      if (crashPage.has(seq)) expect(received.counts.get(key), key).toBeLessThanOrEqual(2);
      else expect(received.counts.get(key), key).toBe(1);
    }
    const repeated = [...expected].filter(([key]) => received.counts.get(key) === 2);
    expect(repeated.length).toBeGreaterThanOrEqual(1);
    expect(survivor.sent.length).toBeGreaterThan(stopped.survivorSent);
    const relay = await client.workflow.getHandle(relayId).describe();
    expect(relay.status.name).toBe('RUNNING');
  });
});

describe('the progress relay with two worker processes', () => {
  const queue = `relay-processes-${process.pid}`;
  let children: Child[] = [];

  beforeAll(async () => {
    await setUpScene(queue);
    // Started before the workers, which join it: test timing, so a dead worker's run moves on after 5 s.
    // Long runs, as above: a successor resuming from the run's start instead of its last heartbeat would repeat signals.
    relayId = await ensureRelay(client, queue, cluster.client.baseUrl, { ...TEST_RELAY_TUNING, runMs: 10 * 60_000 });
    const env = { ...temporalEnv(), TEMPORAL_TASK_QUEUE: queue, CLUSTER_URL: cluster.url, DATA_DIR: os.tmpdir() };
    children = await Promise.all([spawnWorker(env), spawnWorker(env)]);
  });
  afterAll(async () => {
    for (const child of children) await child.stop();
    await tearDownScene();
  });

  it('moves to the other process when the one running it is killed (SIGKILL) and resumes from its last heartbeat: nothing lost, nothing repeated', async () => {
    await failNodes(true);
    await settledFeed();
    const runner = await eventually('a worker process running the relay', async () => {
      const identity = (await relayRun())?.lastWorkerIdentity ?? '';
      return children.find((c) => identity.startsWith(`${c.process.pid}@`));
    });
    const survivor = children.find((c) => c !== runner)!;
    await runner.kill9();
    await failNodes(true);
    const events = await settledFeed();
    const received = await receivedSignals();
    expect(Object.fromEntries(received.counts)).toEqual(Object.fromEntries([...expectedSignals(events).keys()].map((k) => [k, 1])));
    const run = await relayRun();
    expect(run?.lastWorkerIdentity).toMatch(new RegExp(`^${survivor.process.pid}@`));
    expect(run?.attempt).toBeGreaterThan(1);
    // The relay's history across the kill (activity retried on the survivor) replays and is kept as a fixture.
    await replayAndKeep(client, relayId, 'relay-worker-killed');
  });
});
