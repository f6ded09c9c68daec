/**
 * Benchmark of the reference cluster; prints JSON lines, asserts nothing.
 *
 * 1. Over HTTP on loopback, against a cluster in its own process: GET /healthz as the baseline, then
 *    guarded writes (add-learner / drop-learner pairs on many partitions at once) and idempotent retries,
 *    each with req/s and p50/p99, so the write figures read as a ratio of the bare HTTP round trip.
 * 2. Stepped simulation speed for 100 nodes / 10,000 partitions / RF 3 with moves in flight: simulated
 *    seconds per wall second, then the size of the database it left.
 */
import { readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ClusterClient } from '../cluster/client';
import type { Partition, Topology } from '../cluster/contract';
import { spawnCluster } from '../cluster/spawn';

const TARGETS = { writesPerSec: 2000, p99Ms: 10, simSpeedup: 100 };

function emit(line: Record<string, unknown>): void {
  console.log(JSON.stringify({ bench: 'cluster', ...line }));
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** CPU time (user + system) the process has used so far, in ms; null where /proc is not available. */
function cpuMsOf(pid: number): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    // utime and stime are fields 14 and 15 of the whole line, in clock ticks (100 per second on Linux).
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return null;
  }
}

/**
 * The cluster's own CPU per request during a phase: on a machine where the load generator shares the cores,
 * 1000 / this is what one core of the cluster could serve, whatever the generator manages to send.
 */
async function withServerCpu<T extends { count: number }>(pid: number, phase: () => Promise<T>) {
  const before = cpuMsOf(pid);
  const result = await phase();
  const after = cpuMsOf(pid);
  const perRequest = before === null || after === null || result.count === 0 ? null : (after - before) / result.count;
  return {
    result,
    server: perRequest === null ? null : { cpuMsPerRequest: round(perRequest, 3), oneCoreCapacityPerSec: round(1000 / perRequest, 0) },
  };
}

interface LoadResult {
  count: number;
  seconds: number;
  perSec: number;
  p50Ms: number;
  p99Ms: number;
}

/** Run `worker(i)` on `concurrency` lanes for `seconds`; each call is one timed request. */
async function load(
  concurrency: number,
  seconds: number,
  worker: (lane: number) => Promise<void>,
): Promise<LoadResult> {
  const latencies: number[] = [];
  const deadline = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, lane) => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        await worker(lane);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    count: latencies.length,
    seconds: round(elapsed),
    perSec: round(latencies.length / elapsed, 0),
    p50Ms: round(quantile(latencies, 0.5), 3),
    p99Ms: round(quantile(latencies, 0.99), 3),
  };
}

/**
 * Loopback HTTP with a keep-alive agent: fetch (undici) costs the load generator more CPU per request than
 * the cluster spends answering, and client and server share this machine's cores.
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

function request(url: string, method: 'GET' | 'POST', body?: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      url,
      {
        method,
        agent,
        headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function post(url: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const r = await request(url, 'POST', body);
  return { status: r.status, json: JSON.parse(r.text) };
}

function outsider(p: Partition, topo: Topology, lane: number): string {
  const holders = new Set([p.owner, ...p.followers, ...p.learners, ...(p.leaving ? [p.leaving] : [])]);
  const free = topo.nodes.filter((n) => n.live && !holders.has(n.id));
  return free[lane % free.length]!.id;
}

/** `--profile DIR`: the cluster process writes a V8 CPU profile there when it exits. */
function profileArgs(dir: string | undefined): string[] {
  return dir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', dir];
}

interface Slot {
  p: Partition;
  target: string;
  gen: number;
  hasLearner: boolean;
}

async function httpBench(seconds: number, levels: number[], profile: string | undefined): Promise<void> {
  // Budget limits high enough that the write path, not the sync budget, is what gets measured.
  const cluster = await spawnCluster(
    {
      nodes: 20,
      partitions: 400,
      streams: 0,
      seed: 7,
      clock: 'stepped',
      'per-node-limit': 1000,
      'cluster-limit': 100_000,
    },
    { nodeArgs: profileArgs(profile) },
  );
  try {
    const client = new ClusterClient(cluster.url);
    const topo = await client.topology();
    const slots: Slot[] = topo.partitions
      .filter((p) => p.kind === 'queue' && p.pendingRecovery === null)
      .map((p, i) => ({ p, target: outsider(p, topo, i), gen: p.generation, hasLearner: false }));
    for (let i = 0; i < 200; i += 1) await request(`${cluster.url}/healthz`, 'GET');
    let keySeq = 0;

    for (const concurrency of levels) {
      const { result: health, server: healthServer } = await withServerCpu(cluster.pid, () =>
        load(concurrency, seconds, async () => {
          await request(`${cluster.url}/healthz`, 'GET');
        }),
      );
      emit({ metric: 'healthz', unit: 'requests/s, ms', concurrency, requests: health.count, seconds: health.seconds, perSec: health.perSec, p50Ms: health.p50Ms, p99Ms: health.p99Ms, server: healthServer });

      // Each lane owns a disjoint slice of partitions, so no write races another lane's generation.
      const lanes = Array.from({ length: concurrency }, (_, lane) => slots.filter((_, i) => i % concurrency === lane));
      const cursor = Array.from({ length: concurrency }, () => 0);
      let accepted = 0;
      let refused = 0;
      const refusals: Record<string, number> = {};
      const { result: writes, server: writeServer } = await withServerCpu(cluster.pid, () =>
        load(concurrency, seconds, async (lane) => {
          const slice = lanes[lane]!;
          const slot = slice[cursor[lane]! % slice.length]!;
          cursor[lane]! += 1;
          const write = slot.hasLearner ? 'drop-learner' : 'add-learner';
          keySeq += 1;
          const r = await post(`${cluster.url}/v1/partitions/${encodeURIComponent(slot.p.id)}/${write}`, {
            node: slot.target,
            expectedGeneration: slot.gen,
            idempotencyKey: `bench-${keySeq}`,
          });
          const reply = r.json as { ok: boolean; partition?: Partition; refusal?: { code: string } };
          if (reply.ok && reply.partition) {
            accepted += 1;
            slot.gen = reply.partition.generation;
            slot.hasLearner = !slot.hasLearner;
          } else {
            refused += 1;
            const code = reply.refusal?.code ?? `http_${r.status}`;
            refusals[code] = (refusals[code] ?? 0) + 1;
            const fresh = (await client.partition(slot.p.id)).partition;
            slot.gen = fresh.generation;
            slot.hasLearner = fresh.learners.includes(slot.target);
          }
        }),
      );
      emit({
        metric: 'guarded_writes',
        unit: 'writes/s, ms',
        kind: 'add-learner/drop-learner pairs',
        concurrency,
        partitions: slots.length,
        writes: writes.count,
        accepted,
        refused,
        refusals,
        seconds: writes.seconds,
        perSec: writes.perSec,
        p50Ms: writes.p50Ms,
        p99Ms: writes.p99Ms,
        vsHealthz: { throughput: round(writes.perSec / health.perSec), p99: round(writes.p99Ms / health.p99Ms) },
        server: writeServer,
        target: `>= ${TARGETS.writesPerSec} writes/s, p99 < ${TARGETS.p99Ms} ms`,
        meetsTarget: writes.perSec >= TARGETS.writesPerSec && writes.p99Ms < TARGETS.p99Ms,
      });

      // Retries of answered keys: the reply comes from the idempotency record, not a new transaction.
      const answered = Array.from({ length: concurrency }, (_, lane) => {
        const slot = lanes[lane]![0]!;
        const body = { node: slot.target, expectedGeneration: 0, idempotencyKey: `bench-retry-${concurrency}-${lane}` };
        return { url: `${cluster.url}/v1/partitions/${encodeURIComponent(slot.p.id)}/add-learner`, body };
      });
      for (const a of answered) await post(a.url, a.body);
      const { result: retries, server: retryServer } = await withServerCpu(cluster.pid, () =>
        load(concurrency, seconds, async (lane) => {
          const a = answered[lane]!;
          await post(a.url, a.body);
        }),
      );
      emit({ metric: 'idempotent_retries', unit: 'writes/s, ms', concurrency, writes: retries.count, seconds: retries.seconds, perSec: retries.perSec, p50Ms: retries.p50Ms, p99Ms: retries.p99Ms, vsHealthz: { throughput: round(retries.perSec / health.perSec) }, server: retryServer });
    }
  } finally {
    await cluster.close();
  }
}

function dirBytes(dir: string): { bytes: number; files: Record<string, number> } {
  const files: Record<string, number> = {};
  let bytes = 0;
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const st = statSync(path.join(dir, name));
    if (!st.isFile()) continue;
    files[name] = st.size;
    bytes += st.size;
  }
  return { bytes, files };
}

async function simBench(simSeconds: number, nodes: number, partitions: number, profile: string | undefined): Promise<void> {
  const started = performance.now();
  const cluster = await spawnCluster(
    { nodes, partitions, streams: 0, seed: 11, clock: 'stepped' },
    { startTimeoutMs: 300_000, keepData: true, nodeArgs: profileArgs(profile) },
  );
  const startupSeconds = (performance.now() - started) / 1000;
  try {
    const client = new ClusterClient(cluster.url, { timeoutMs: 600_000 });
    const topo = await client.topology();
    const rf = topo.partitions[0]?.replicationFactor;
    const initial = new Map(topo.partitions.map((p) => [p.id, p]));
    // Partitions with a move in flight: only these are read back each step (the topology is 10,000 records).
    const moving = new Set<string>();
    let next = 0;
    const queue = topo.partitions.filter((p) => p.kind === 'queue');
    let keySeq = 0;
    let movesStarted = 0;
    let swaps = 0;
    let removals = 0;
    // Keep the sync budget full of moves: add learners, swap them in once admitted, remove the leaving copy.
    const driveMoves = async (): Promise<void> => {
      for (const id of [...moving]) {
        const p = (await client.partition(id)).partition;
        const key = `sim-${(keySeq += 1)}`;
        if (p.leaving !== null) {
          const r = await client.write(p.id, 'remove-leaving', { node: p.leaving, expectedGeneration: p.generation, idempotencyKey: key });
          if (r.ok) {
            removals += 1;
            moving.delete(id);
          }
        } else if (p.learners.length > 0 && p.history.some((h) => h.node === p.learners[0])) {
          const r = await client.write(p.id, 'swap', { learner: p.learners[0]!, leaving: p.followers[0]!, expectedGeneration: p.generation, idempotencyKey: key });
          if (r.ok) swaps += 1;
        } else if (p.learners.length === 0) {
          moving.delete(id);
        }
      }
      const budget = await client.syncBudget();
      let room = budget.clusterLimit - budget.clusterInUse;
      while (room > 0 && next < queue.length) {
        const p = initial.get(queue[next]!.id)!;
        next += 1;
        const r = await client.write(p.id, 'add-learner', { node: outsider(p, topo, next), expectedGeneration: p.generation, idempotencyKey: `sim-${(keySeq += 1)}` });
        if (r.ok) {
          movesStarted += 1;
          moving.add(p.id);
          room -= 1;
        } else if (r.refusal.code === 'no_sync_budget') {
          room -= 1;
        }
      }
    };
    await driveMoves();
    let advanceWall = 0;
    let driveWall = 0;
    const stepMs = 1000;
    for (let t = 0; t < simSeconds * 1000; t += stepMs) {
      const t0 = performance.now();
      await client.advance(stepMs);
      advanceWall += performance.now() - t0;
      const t1 = performance.now();
      await driveMoves();
      driveWall += performance.now() - t1;
    }
    // The same span again in one call: the simulation alone, without a round trip per simulated second.
    const t2 = performance.now();
    await client.advance(simSeconds * 1000);
    const oneCallWall = (performance.now() - t2) / 1000;
    const inv = await client.invariants();
    emit({
      metric: 'simulation',
      unit: 'simulated seconds per wall second',
      nodes: topo.nodes.length,
      partitions: topo.partitions.length,
      replicationFactor: rf,
      simulatedSeconds: simSeconds,
      stepMs,
      advanceWallSeconds: round(advanceWall / 1000, 3),
      speedup: round(simSeconds / (advanceWall / 1000), 1),
      movesStarted,
      swaps,
      removals,
      movesInFlightAtEnd: moving.size,
      driverWallSeconds: round(driveWall / 1000, 3),
      oneCall: { simulatedSeconds: simSeconds, wallSeconds: round(oneCallWall, 3), speedup: round(simSeconds / oneCallWall, 1) },
      startupSeconds: round(startupSeconds, 1),
      breaches: inv.breaches.length,
      target: `>= ${TARGETS.simSpeedup}x real time`,
      meetsTarget: simSeconds / (advanceWall / 1000) >= TARGETS.simSpeedup,
    });
  } finally {
    await cluster.close();
  }
  const size = dirBytes(cluster.dataDir);
  emit({ metric: 'database', unit: 'bytes', afterSimulatedSeconds: simSeconds, nodes, partitions, bytes: size.bytes, mib: round(size.bytes / 2 ** 20), files: size.files });
  rmSync(cluster.dataDir, { recursive: true, force: true });
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      seconds: { type: 'string', default: '4' },
      // Comma-separated: each level gets its own healthz, write and retry lines.
      concurrency: { type: 'string', default: '1,4,16' },
      'sim-seconds': { type: 'string', default: '60' },
      nodes: { type: 'string', default: '100' },
      partitions: { type: 'string', default: '10000' },
      only: { type: 'string' },
      profile: { type: 'string' },
    },
  });
  if (values.only !== 'sim') {
    await httpBench(Number(values.seconds), values.concurrency.split(',').map(Number), values.profile);
  }
  if (values.only !== 'http') {
    await simBench(Number(values['sim-seconds']), Number(values.nodes), Number(values.partitions), values.profile);
  }
}
