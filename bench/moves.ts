/**
 * `npm run bench -- moves [--n 50,200] [--persist]`: N concurrent follower moves against the reference cluster with
 * fast transfers. Prints JSON lines per N: moves per minute, p50/p99 orchestration overhead per move (time
 * beyond the simulated transfer, i.e. beyond add-learner -> admitted), Temporal history events per move,
 * worker CPU seconds and peak RSS; and, as the baseline measured in the same run, the same moves driven by
 * a plain loop calling the broker directly (no Temporal), so the overhead reads as a ratio.
 * Also the floor (issue 20): the same count of workflows of a move's shape with nothing behind them (bench/floor),
 * whose p99 the moves' p99 overhead is printed against (bar 1.5 at 200 moves).
 * Bars (issue 8, for the moves built on the step library): at most 40 history events per move, and a p50
 * overhead at most 8.3 times the direct baseline's at 200 concurrent moves. Also printed: where a move's history
 * events go (by event type), to see what a change saved.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import pino from 'pino';
import { startFollowerMove } from '../operations/moves';
import { ClusterClient } from '../cluster/client';
import { spawnCluster } from '../cluster/spawn';
import type { ClusterEvent, WriteReply } from '../cluster/contract';
import { startDevServer, type DevServer } from '../scripts/dev-server';
import { percentile } from './stats';
import { ensureTemporalCli } from '../scripts/temporal-cli';
import { installRuntimeLogger } from '../worker/logger';
import { reconfigurationWorkflowId, statusQuery } from '../rules/definitions';
import { createRebalancerWorker } from '../worker/worker';
import { createFloorActivities } from './floor/activities';
import { floorMove, floorSignal } from './floor/workflow';

interface Planned {
  partition: string;
  from: string;
  to: string;
}

/** Pick `n` partitions not used yet, a follower of each and a target spread over the nodes. */
async function plan(cluster: ClusterClient, n: number, used: Set<string>): Promise<Planned[]> {
  const topology = await cluster.topology();
  const nodes = topology.nodes.map((x) => x.id);
  const out: Planned[] = [];
  let k = 0;
  for (const p of topology.partitions) {
    if (out.length === n) break;
    if (p.kind !== 'queue' || used.has(p.id)) continue;
    const holders = new Set([p.owner, ...p.followers]);
    let to = nodes[k++ % nodes.length]!;
    while (holders.has(to)) to = nodes[k++ % nodes.length]!;
    used.add(p.id);
    out.push({ partition: p.id, from: p.followers[0]!, to });
  }
  if (out.length < n) throw new Error(`only ${out.length} partitions left for ${n} moves`);
  return out;
}

/**
 * Simulated transfer time per partition: from its add-learner to its admission, in cluster ms; and when each was
 * admitted (`admittedAt`, the broker's clock).
 */
async function transferTimes(cluster: ClusterClient, after: number, partitions: Set<string>, admittedAt = new Map<string, number>()): Promise<Map<string, number>> {
  const added = new Map<string, number>();
  const took = new Map<string, number>();
  let cursor = after;
  for (;;) {
    const page = await cluster.events(cursor, { limit: 10_000 });
    for (const e of page.events as ClusterEvent[]) {
      if (!('partition' in e) || !partitions.has(e.partition)) continue;
      if (e.type === 'assignment_changed' && e.write === 'add-learner') added.set(e.partition, e.at);
      if (e.type === 'admitted' && added.has(e.partition) && !took.has(e.partition)) {
        took.set(e.partition, e.at - added.get(e.partition)!);
        admittedAt.set(e.partition, e.at);
      }
    }
    if (page.events.length === 0) return took;
    cursor = page.cursor;
  }
}

async function lastSeq(cluster: ClusterClient): Promise<number> {
  let cursor = 0;
  for (;;) {
    const page = await cluster.events(cursor, { limit: 10_000 });
    if (page.events.length === 0) return cursor;
    cursor = page.cursor;
  }
}

/** Mean count per move of each history event type (the first 20 moves), e.g. how many upserts and signals a move costs. */
async function eventsByType(handles: WorkflowHandle[]): Promise<Record<string, number>> {
  const sample = handles.slice(0, 20);
  const counts: Record<string, number> = {};
  for (const handle of sample) {
    for (const e of (await handle.fetchHistory()).events ?? []) {
      // The one attributes field an event carries names its type (workflowTaskCompletedEventAttributes, ...).
      const type = Object.entries(e).find(([k, v]) => k.endsWith('EventAttributes') && v)?.[0].replace(/EventAttributes$/, '') ?? 'unknown';
      counts[type] = (counts[type] ?? 0) + 1;
    }
  }
  return Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, Number((v / sample.length).toFixed(2))]));
}

/** The same steps with no orchestrator: the baseline for overhead. */
async function directMove(cluster: ClusterClient, m: Planned, tag: string): Promise<void> {
  const write = async (name: 'add-learner' | 'swap' | 'remove-leaving', body: Record<string, unknown>): Promise<WriteReply> => {
    for (let i = 0; ; i++) {
      const { partition } = await cluster.partition(m.partition);
      const reply = await cluster.write(m.partition, name, { ...body, expectedGeneration: partition.generation, idempotencyKey: `${tag}/${m.partition}/${name}/${i}` } as never);
      if (reply.ok || !['generation_mismatch', 'no_sync_budget', 'not_caught_up', 'boundary_not_covered', 'change_in_flight'].includes(reply.refusal.code)) return reply;
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const wait = async (done: () => Promise<boolean>) => {
    while (!(await done())) await new Promise((r) => setTimeout(r, 100));
  };
  if (!(await write('add-learner', { node: m.to })).ok) throw new Error(`direct add-learner failed on ${m.partition}`);
  await wait(async () => (await cluster.partition(m.partition)).partition.history.some((h) => h.node === m.to));
  const swap = await write('swap', { learner: m.to, leaving: m.from });
  if (!swap.ok) throw new Error(`direct swap failed on ${m.partition}`);
  await wait(async () => ((await cluster.progress(m.partition)).replicas.find((r) => r.node === m.to)?.durableOffset ?? -1) >= swap.boundary!);
  if (!(await write('remove-leaving', { node: m.from })).ok) throw new Error(`direct remove failed on ${m.partition}`);
}

interface RunFigures {
  wallMs: number;
  overhead: number[];
  completed: number;
  cpuS: number;
  peakRssMb: number;
  history?: number[];
  /** When each partition's learner was admitted, by the feed. */
  admittedAt: Map<string, number>;
}

async function measure(body: () => Promise<{ durations: Map<string, number> }>, cluster: ClusterClient, moves: Planned[]): Promise<RunFigures> {
  const before = await lastSeq(cluster);
  const cpu0 = process.cpuUsage();
  let peak = process.memoryUsage().rss;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 100);
  const t0 = Date.now();
  const { durations } = await body();
  const wallMs = Date.now() - t0;
  clearInterval(sampler);
  const cpu = process.cpuUsage(cpu0);
  const admittedAt = new Map<string, number>();
  const transfers = await transferTimes(cluster, before, new Set(moves.map((m) => m.partition)), admittedAt);
  // The broker's clock counts from its own start: its offset to this process's clock, read now (a read's latency off).
  const asked = Date.now();
  const offset = asked - (await cluster.topology()).now;
  for (const [p, at] of admittedAt) admittedAt.set(p, at + offset);
  const overhead = moves.filter((m) => durations.has(m.partition)).map((m) => durations.get(m.partition)! - (transfers.get(m.partition) ?? 0));
  return { wallMs, overhead, completed: durations.size, cpuS: (cpu.user + cpu.system) / 1e6, peakRssMb: Math.round(peak / 1024 / 1024), admittedAt };
}

function line(n: number, mode: string, f: RunFigures, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    bench: 'moves',
    n,
    mode,
    completed: f.completed,
    moves_per_minute: Math.round((f.completed / f.wallMs) * 60_000),
    overhead_ms_p50: Math.round(percentile(f.overhead, 50)),
    overhead_ms_p99: Math.round(percentile(f.overhead, 99)),
    cpu_seconds: Number(f.cpuS.toFixed(2)),
    peak_rss_mb: f.peakRssMb,
    ...extra,
  };
}

/** From each learner's admission in the feed to the relay's signal of it to the move: p50, p99 and the bar (1 s). */
function relayLag(admittedAt: Map<string, number>, sent: Map<string, number>): Record<string, number> {
  const lags = [...admittedAt].flatMap(([p, at]) => (sent.has(reconfigurationWorkflowId(p)) ? [sent.get(reconfigurationWorkflowId(p))! - at] : []));
  return { relay_admitted_lag_ms_p50: Math.round(percentile(lags, 50)), relay_admitted_lag_ms_p99: Math.round(percentile(lags, 99)), relay_admitted_lag_ms_bar: 1000, relay_admitted_signals: lags.length };
}

/**
 * The floor (issue 20, item 3): `n` workflows of a move's shape with nothing behind them (bench/floor), started at
 * once with their two signals sent as each starts; their durations from start to close.
 */
async function floor(client: Client, taskQueue: string, n: number): Promise<number[]> {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const started = Date.now();
      const handle = await client.workflow.start(floorMove, { taskQueue, workflowId: `bench-floor-${process.pid}-${n}-${i}` });
      await handle.signal(floorSignal, 1);
      await handle.signal(floorSignal, 2);
      await handle.result();
      return Date.now() - started;
    }),
  );
}

/** One printed line of the benchmark. */
export type MovesLine = Record<string, unknown>;

/** Runs the benchmark, prints each line as JSON and returns them (`bench -- scale` folds the 200-move figures in). */
export async function run(args: string[]): Promise<MovesLine[]> {
  const lines: MovesLine[] = [];
  const print = (l: MovesLine) => {
    lines.push(l);
    console.log(JSON.stringify(l));
  };
  const nIndex = args.indexOf('--n');
  const sizes = (nIndex >= 0 ? args[nIndex + 1]! : '50,200').split(',').map(Number);
  const total = sizes.reduce((a, b) => a + b, 0) * 2;
  const logger = pino({ level: 'error' });
  installRuntimeLogger(logger);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-moves-'));
  // The dev server's SQLite file is the bottleneck on a shared 2-core machine; --persist measures with it.
  const persist = args.includes('--persist');

  let server: DevServer | null = null;
  let address = process.env.TEMPORAL_ADDRESS;
  if (!address) {
    server = await startDevServer({ executable: await ensureTemporalCli(), dbFile: persist ? path.join(dir, 'temporal.db') : null, uiPort: null });
    address = server.address;
  }
  const broker = await spawnCluster(
    {
      nodes: 40, partitions: total, streams: 0, clock: 'wall', 'tick-ms': 50, 'initial-messages': 2000, 'retain-messages': 1000,
      'transfer-rate': 50_000_000, 'publish-rate': 5, 'catch-up-slack': 50, 'per-node-limit': 100, 'cluster-limit': 100_000,
    },
    { dataDir: path.join(dir, 'cluster') },
  );
  const cluster = new ClusterClient(broker.url);
  process.stderr.write(`moves bench: Temporal at ${address}, reference cluster at ${cluster.baseUrl}\n`);
  const connection = await Connection.connect({ address });
  const client = new Client({ connection });
  const taskQueue = `bench-moves-${process.pid}`;
  // When the relay sent each move its admission (the signal a move waits on longest): against the event's time, the
  // relay's lag.
  const admittedSent = new Map<string, number>();
  const relayAfterSignal = async (sent: { workflowId: string; signal: string }) => {
    if (sent.signal === 'admitted' && !admittedSent.has(sent.workflowId)) admittedSent.set(sent.workflowId, Date.now());
  };
  const worker = await createRebalancerWorker({ temporal: { address, namespace: 'default', taskQueue }, clusterUrl: cluster.baseUrl, logger, relayAfterSignal });
  const running = worker.run();
  const floorQueue = `bench-floor-${process.pid}`;
  const floorWorker = await Worker.create({
    connection: await NativeConnection.connect({ address }),
    taskQueue: floorQueue,
    workflowsPath: path.resolve(import.meta.dirname, 'floor/workflow.ts'),
    activities: createFloorActivities(),
    maxCachedWorkflows: 1000,
  });
  const floorRunning = floorWorker.run();
  const used = new Set<string>();
  try {
    for (const n of sizes) {
      const moves = await plan(cluster, n, used);
      const progress = (what: string) => process.stderr.write(`moves bench n=${n}: ${what}\n`);
      progress(`starting ${n} follower moves as workflows`);
      let history: number[] = [];
      let eventTypes: Record<string, number> = {};
      const temporal = await measure(async () => {
        const durations = new Map<string, number>();
        const handles = await Promise.all(
          moves.map(async (m) => ({ m, started: Date.now(), handle: await startFollowerMove({ client, cluster, taskQueue }, { ...m, origin: 'planner' }) })),
        );
        const pending = new Set(handles.map((h) => h.m.partition));
        const reporter = setInterval(() => {
          void Promise.all(
            handles.filter((h) => pending.has(h.m.partition)).slice(0, 5).map((h) => h.handle.query(statusQuery).then((s) => `${s.partition} ${s.phase}: ${s.blockingReason ?? ''}`, () => `${h.m.partition} ?`)),
          ).then((lines) => lines.length && progress(`${pending.size} still running, e.g. ${lines.join(' | ')}`));
        }, 10_000);
        await Promise.all(
          handles.map(async ({ m, started, handle }) => {
            // A move that did not complete ends its workflow Failed or Canceled, the reason in the failure.
            const outcome = await handle.result().catch((err: unknown) => ({ status: 'ended', reason: err instanceof Error ? (err.cause as Error | undefined)?.message ?? err.message : String(err) }));
            pending.delete(m.partition);
            if (outcome.status === 'completed') durations.set(m.partition, Date.now() - started);
            else progress(`${m.partition} ended ${outcome.status}: ${'reason' in outcome ? outcome.reason : ''}`);
            if (durations.size % Math.max(1, Math.floor(n / 4)) === 0) progress(`${durations.size}/${n} completed`);
          }),
        );
        clearInterval(reporter);
        history = await Promise.all(handles.map(async ({ handle }) => (await handle.describe()).historyLength));
        eventTypes = await eventsByType(handles.map((h) => h.handle));
        return { durations };
      }, cluster, moves);
      const baselineMoves = await plan(cluster, n, used);
      progress(`baseline: the same ${n} moves driven directly, without Temporal`);
      const direct = await measure(async () => {
        const durations = new Map<string, number>();
        await Promise.all(
          baselineMoves.map(async (m) => {
            const started = Date.now();
            await directMove(cluster, m, `bench-${process.pid}-${n}`);
            durations.set(m.partition, Date.now() - started);
          }),
        );
        return { durations };
      }, cluster, baselineMoves);
      progress(`floor: ${n} workflows of a move's shape with nothing behind them`);
      const floorMs = await floor(client, floorQueue, n);
      const t = line(n, 'temporal', temporal, {
        temporal_server: process.env.TEMPORAL_ADDRESS ? 'TEMPORAL_ADDRESS' : persist ? 'dev server, SQLite file' : 'dev server, in memory',
        history_events_per_move_p50: percentile(history, 50),
        history_events_per_move_max: Math.max(...history),
        history_events_per_move_bar: 40,
        history_events_per_move_by_type_mean: eventTypes,
        ...relayLag(temporal.admittedAt, admittedSent),
      });
      const d = line(n, 'direct-baseline', direct);
      print(t);
      print(d);
      const floorP99 = percentile(floorMs, 99);
      print({ bench: 'moves', n, mode: 'floor', what: 'a workflow of the same shape, no broker (bench/floor)', duration_ms_p50: Math.round(percentile(floorMs, 50)), duration_ms_p99: Math.round(floorP99) });
      print({
        bench: 'moves', n, mode: 'ratio temporal/direct',
        overhead_p50_ratio: Number((temporal.overhead.length ? percentile(temporal.overhead, 50) / Math.max(1, percentile(direct.overhead, 50)) : NaN).toFixed(2)),
        overhead_p50_ratio_bar: n >= 200 ? 8.3 : null,
        moves_per_minute_ratio: Number(((t.moves_per_minute as number) / Math.max(1, d.moves_per_minute as number)).toFixed(2)),
        overhead_p99_to_floor_p99: Number((percentile(temporal.overhead, 99) / Math.max(1, floorP99)).toFixed(2)),
        overhead_p99_to_floor_p99_bar: n >= 200 ? 1.5 : null,
      });
    }
    const report = await cluster.invariants();
    print({ bench: 'moves', invariant_breaches: report.breaches.length });
    return lines;
  } finally {
    floorWorker.shutdown();
    await floorRunning;
    worker.shutdown();
    await running;
    await connection.close();
    await broker.close();
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
