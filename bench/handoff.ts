/**
 * `npm run bench -- handoff [--n 20] [--rate 200] [--concurrency 1]`: N planned owner handoffs against the
 * reference cluster while every partition publishes `rate` messages per second. Prints JSON lines: how long
 * admission stayed closed per handoff, p50/p99, on the workflow clock (close reply to reopen reply) and on the
 * broker's clock (admission_closed to admission_reopened events, the time publishes actually waited); and,
 * as the baseline measured in the same run on the same partitions, a seal-and-recover: the owner failed with
 * the fault control, timed from the failure to the activation (recovery_opened to recovery_activated), during
 * which the partition is fenced and serves nothing.
 */
import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import { startHandoff } from '../operations/handoff';
import { ClusterClient } from '../cluster/client';
import type { ClusterEvent } from '../cluster/contract';
import { spawnCluster } from '../cluster/spawn';
import { startDevServer, type DevServer } from '../scripts/dev-server';
import { ensureTemporalCli } from '../scripts/temporal-cli';
import { installRuntimeLogger } from '../worker/logger';
import { createRebalancerWorker } from '../worker/worker';
import type { MoveOutcome } from '../rules/definitions';
import { option } from './options';
import { percentile } from './stats';

/** Every event after `after`, in feed order. */
async function eventsAfter(cluster: ClusterClient, after: number): Promise<{ events: ClusterEvent[]; cursor: number }> {
  const events: ClusterEvent[] = [];
  let cursor = after;
  for (;;) {
    const page = await cluster.events(cursor, { limit: 10_000 });
    if (page.events.length === 0) return { events, cursor };
    events.push(...page.events);
    cursor = page.cursor;
  }
}

/** Broker-clock durations per partition, from the first `start` event to the next `end` event. */
function spans(events: ClusterEvent[], start: ClusterEvent['type'], end: ClusterEvent['type']): number[] {
  const open = new Map<string, number>();
  const out: number[] = [];
  for (const e of events) {
    if (!('partition' in e)) continue;
    if (e.type === start && !open.has(e.partition)) open.set(e.partition, e.at);
    if (e.type === end && open.has(e.partition)) {
      out.push(e.at - open.get(e.partition)!);
      open.delete(e.partition);
    }
  }
  return out;
}

const figures = (xs: number[]) => ({ p50: Math.round(percentile(xs, 50)), p99: Math.round(percentile(xs, 99)), max: Math.round(Math.max(...xs)) });

export async function run(args: string[]): Promise<void> {
  const n = option(args, '--n', 20);
  const rate = option(args, '--rate', 200);
  const concurrency = option(args, '--concurrency', 1);
  const logger = pino({ level: 'error' });
  installRuntimeLogger(logger);

  let server: DevServer | null = null;
  let address = process.env.TEMPORAL_ADDRESS;
  if (!address) {
    server = await startDevServer({ executable: await ensureTemporalCli(), dbFile: null, uiPort: null });
    address = server.address;
  }
  // The reference cluster's own defaults for recovery (recovery-delay-ms) and catch-up: the baseline is what it
  // does out of the box.
  const broker = await spawnCluster({ nodes: 6, partitions: n + 1, streams: 0, clock: 'wall', 'tick-ms': 50, 'publish-rate': rate });
  const cluster = new ClusterClient(broker.url);
  const progress = (what: string) => process.stderr.write(`handoff bench: ${what}\n`);
  progress(`Temporal at ${address}, reference cluster at ${cluster.baseUrl}, ${n} partitions publishing ${rate}/s each`);
  const connection = await Connection.connect({ address });
  const client = new Client({ connection });
  const taskQueue = `bench-handoff-${process.pid}`;
  const worker = await createRebalancerWorker({ temporal: { address, namespace: 'default', taskQueue }, clusterUrl: cluster.baseUrl, logger });
  const running = worker.run();
  try {
    const [warmup, ...partitions] = (await cluster.topology()).partitions;
    // One handoff first, outside the figures: the worker's first workflow task bundles its workflow code.
    await (await startHandoff({ client, cluster, taskQueue }, { partition: warmup!.id, from: warmup!.owner, to: warmup!.followers[0]!, origin: 'planner' })).result();
    const { cursor: start } = await eventsAfter(cluster, 0);

    // ---- N handoffs, `concurrency` at a time, each from the owner to its first follower.
    const closed: number[] = [];
    const total: number[] = [];
    const queue = [...partitions];
    const workers = Array.from({ length: concurrency }, async () => {
      for (let p = queue.shift(); p; p = queue.shift()) {
        const t0 = Date.now();
        const handle = await startHandoff({ client, cluster, taskQueue }, { partition: p.id, from: p.owner, to: p.followers[0]!, origin: 'planner' });
        const outcome = (await handle.result()) as MoveOutcome;
        if (outcome.status !== 'completed') throw new Error(`handoff of ${p.id} ended ${outcome.status}`);
        closed.push(outcome.admissionClosedMs!);
        total.push(Date.now() - t0);
        if (closed.length % Math.max(1, Math.floor(n / 4)) === 0) progress(`${closed.length}/${n} handoffs completed`);
      }
    });
    await Promise.all(workers);
    const { events: handoffEvents, cursor: afterHandoffs } = await eventsAfter(cluster, start);

    // ---- the baseline: the same partitions' (new) owners failed, timed from failure to activation.
    progress(`baseline: failing the owner of the same ${n} partitions, one seal-and-recover each`);
    const wall: number[] = [];
    await Promise.all(
      partitions.map(async (p) => {
        const t0 = Date.now();
        await cluster.fault({ fault: 'fail-owner', partition: p.id });
        for (;;) {
          if ((await cluster.partition(p.id)).partition.pendingRecovery === null) break;
          await new Promise((r) => setTimeout(r, 20));
        }
        wall.push(Date.now() - t0);
      }),
    );
    const { events: recoveryEvents } = await eventsAfter(cluster, afterHandoffs);
    const brokerClosed = spans(handoffEvents, 'admission_closed', 'admission_reopened');
    const fenced = spans(recoveryEvents, 'recovery_opened', 'recovery_activated');

    const handoff = figures(closed);
    const seal = figures(fenced);
    console.log(JSON.stringify({
      bench: 'handoff', n, publish_rate: rate, concurrency, mode: 'planned owner handoff',
      admission_closed_ms_p50: handoff.p50, admission_closed_ms_p99: handoff.p99, admission_closed_ms_max: handoff.max,
      broker_admission_closed_ms_p50: figures(brokerClosed).p50, broker_admission_closed_ms_p99: figures(brokerClosed).p99,
      handoff_total_ms_p50: figures(total).p50, handoff_total_ms_p99: figures(total).p99,
    }));
    console.log(JSON.stringify({
      bench: 'handoff', n, publish_rate: rate, mode: 'seal-and-recover baseline (fail-owner)',
      fenced_ms_p50: seal.p50, fenced_ms_p99: seal.p99, fenced_ms_max: seal.max,
      wall_ms_p50: figures(wall).p50, wall_ms_p99: figures(wall).p99,
    }));
    console.log(JSON.stringify({
      bench: 'handoff', mode: 'ratio handoff/seal-and-recover',
      p50_ratio: Number((handoff.p50 / Math.max(1, seal.p50)).toFixed(3)),
      p99_ratio: Number((handoff.p99 / Math.max(1, seal.p99)).toFixed(3)),
    }));
    console.log(JSON.stringify({ bench: 'handoff', invariant_breaches: (await cluster.invariants()).breaches.length }));
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
    await broker.close();
    await server?.stop();
  }
}
