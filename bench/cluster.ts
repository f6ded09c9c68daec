/**
 * Benchmark of the reference cluster; prints JSON lines, asserts nothing.
 *
 * 1. Over HTTP on loopback, against a cluster in its own process: GET /healthz as the baseline, then
 *    guarded writes (add-learner / drop-learner pairs on many partitions at once) and idempotent retries,
 *    each with req/s and p50/p99, so the write figures read as a ratio of the bare HTTP round trip.
 * 2. Stepped simulation speed for 100 nodes / 10,000 partitions / RF 3 with moves in flight: simulated
 *    seconds per wall second, then the size of the database it left.
 */
import { readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ClusterClient } from '../cluster/client';
import type { Partition, Topology } from '../cluster/contract';
import { spawnCluster } from '../cluster/conformance/spawn';

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

async function post(url: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

function outsider(p: Partition, topo: Topology, lane: number): string {
  const holders = new Set([p.owner, ...p.followers, ...p.learners, ...(p.leaving ? [p.leaving] : [])]);
  const free = topo.nodes.filter((n) => n.live && !holders.has(n.id));
  return free[lane % free.length]!.id;
}

async function httpBench(seconds: number, concurrency: number): Promise<void> {
  // Budget limits high enough that the write path, not the sync budget, is what gets measured.
  const cluster = await spawnCluster({
    nodes: 20,
    partitions: 400,
    streams: 0,
    seed: 7,
    clock: 'stepped',
    'per-node-sync-limit': 1000,
    'cluster-sync-limit': 100_000,
  });
  try {
    const client = new ClusterClient(cluster.url);
    const topo = await client.topology();
    const queues = topo.partitions.filter((p) => p.kind === 'queue' && p.pendingRecovery === null);
    for (let i = 0; i < 200; i += 1) await fetch(`${cluster.url}/healthz`).then((r) => r.text());

    const health = await load(concurrency, seconds, async () => {
      const r = await fetch(`${cluster.url}/healthz`);
      await r.text();
    });
    emit({ metric: 'healthz', unit: 'requests/s, ms', concurrency, requests: health.count, seconds: health.seconds, perSec: health.perSec, p50Ms: health.p50Ms, p99Ms: health.p99Ms });

    // Each lane owns a disjoint slice of partitions, so no write races another lane's generation.
    const lanes = Array.from({ length: concurrency }, (_, lane) =>
      queues.filter((_, i) => i % concurrency === lane).map((p) => ({ p, target: outsider(p, topo, lane), gen: p.generation, hasLearner: false })),
    );
    const cursor = Array.from({ length: concurrency }, () => 0);
    let accepted = 0;
    let refused = 0;
    const refusals: Record<string, number> = {};
    let keySeq = 0;
    const writes = await load(concurrency, seconds, async (lane) => {
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
      const reply = r.json as { ok: boolean; partition?: Partition; refusal?: { code: string; saw: { generation?: number } } };
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
    });
    emit({
      metric: 'guarded_writes',
      unit: 'writes/s, ms',
      kind: 'add-learner/drop-learner pairs',
      concurrency,
      partitions: queues.length,
      writes: writes.count,
      accepted,
      refused,
      refusals,
      seconds: writes.seconds,
      perSec: writes.perSec,
      p50Ms: writes.p50Ms,
      p99Ms: writes.p99Ms,
      vsHealthz: { throughput: round(writes.perSec / health.perSec), p99: round(writes.p99Ms / health.p99Ms) },
      target: `>= ${TARGETS.writesPerSec} writes/s, p99 < ${TARGETS.p99Ms} ms`,
      meetsTarget: writes.perSec >= TARGETS.writesPerSec && writes.p99Ms < TARGETS.p99Ms,
    });

    // Retries of answered keys: the reply comes from the idempotency record, not a new transaction.
    const answered = Array.from({ length: concurrency }, (_, lane) => {
      const slot = lanes[lane]![0]!;
      return { url: `${cluster.url}/v1/partitions/${encodeURIComponent(slot.p.id)}/add-learner`, body: { node: slot.target, expectedGeneration: 0, idempotencyKey: `bench-retry-${lane}` } };
    });
    for (const a of answered) await post(a.url, a.body);
    const retries = await load(concurrency, seconds, async (lane) => {
      const a = answered[lane]!;
      await post(a.url, a.body);
    });
    emit({ metric: 'idempotent_retries', unit: 'writes/s, ms', concurrency, writes: retries.count, seconds: retries.seconds, perSec: retries.perSec, p50Ms: retries.p50Ms, p99Ms: retries.p99Ms, vsHealthz: { throughput: round(retries.perSec / health.perSec) } });
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

async function simBench(simSeconds: number, nodes: number, partitions: number): Promise<void> {
  const started = performance.now();
  const cluster = await spawnCluster(
    { nodes, partitions, streams: 0, seed: 11, clock: 'stepped' },
    { startTimeoutMs: 300_000, keepData: true },
  );
  const startupSeconds = (performance.now() - started) / 1000;
  try {
    const client = new ClusterClient(cluster.url, { timeoutMs: 600_000 });
    let topo = await client.topology();
    const rf = topo.partitions[0]?.replicationFactor;
    let keySeq = 0;
    let movesStarted = 0;
    let swaps = 0;
    let removals = 0;
    // Keep the sync budget full of moves: add learners, swap them in once admitted, remove the leaving copy.
    const driveMoves = async (): Promise<void> => {
      const budget = await client.syncBudget();
      let room = budget.clusterLimit - budget.clusterInUse;
      for (const p of topo.partitions) {
        if (p.kind !== 'queue' || p.pendingRecovery !== null) continue;
        const key = `sim-${(keySeq += 1)}`;
        if (p.leaving !== null) {
          const r = await client.write(p.id, 'remove-leaving', { node: p.leaving, expectedGeneration: p.generation, idempotencyKey: key });
          if (r.ok) removals += 1;
        } else if (p.learners.length > 0 && p.history.some((h) => h.node === p.learners[0])) {
          const r = await client.write(p.id, 'swap', { learner: p.learners[0]!, leaving: p.followers[0]!, expectedGeneration: p.generation, idempotencyKey: key });
          if (r.ok) swaps += 1;
        } else if (p.learners.length === 0 && room > 0 && movesStarted < partitions) {
          const r = await client.write(p.id, 'add-learner', { node: outsider(p, topo, keySeq), expectedGeneration: p.generation, idempotencyKey: key });
          if (r.ok) {
            movesStarted += 1;
            room -= 1;
          }
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
      topo = await client.topology();
      await driveMoves();
      driveWall += performance.now() - t1;
    }
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
      driverWallSeconds: round(driveWall / 1000, 3),
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
      seconds: { type: 'string', default: '5' },
      concurrency: { type: 'string', default: '16' },
      'sim-seconds': { type: 'string', default: '60' },
      nodes: { type: 'string', default: '100' },
      partitions: { type: 'string', default: '10000' },
      only: { type: 'string' },
    },
  });
  if (values.only !== 'sim') await httpBench(Number(values.seconds), Number(values.concurrency));
  if (values.only !== 'http') await simBench(Number(values['sim-seconds']), Number(values.nodes), Number(values.partitions));
}
