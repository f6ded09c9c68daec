/**
 * The Temporal SDK's own worker metrics, as `npm run worker` serves them: the worker process (worker/main.ts)
 * with WORKER_METRICS_PORT runs a follower move, and its Prometheus endpoint then shows the move's workflow
 * tasks and guarded-write activities, named by Prometheus conventions (`_total` counters, units in the name).
 * The same worker's log of a move, as a person reads it: one info line as it starts and one as it ends, with its
 * outcome and duration, and no info line in between (none per poll, per write or per tick of the loop).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFollowerMove } from '../../operations/moves';
import { WORKFLOW_TYPE } from '../../rules/definitions';
import { freePort } from '../../scripts/dev-server';
import { connectClient, eventually, outcomeOf, pickMove, startTestCluster, temporalEnv, type TestCluster } from './helpers';

const root = path.resolve(import.meta.dirname, '../..');
const taskQueue = `sdk-metrics-${process.pid}`;
let cluster: TestCluster;
let client: Client;
let worker: ChildProcess;
let metricsUrl: string;
let output = '';

beforeAll(async () => {
  cluster = await startTestCluster({}, { nodes: 4, partitions: 1, streams: 0 });
  client = await connectClient();
  const port = await freePort();
  metricsUrl = `http://127.0.0.1:${port}/metrics`;
  worker = spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
    cwd: root,
    // The worker's rebalancer loop plans nothing under this threshold: the move below is the only one.
    env: { ...process.env, ...temporalEnv(), TEMPORAL_TASK_QUEUE: taskQueue, CLUSTER_URL: cluster.url, WORKER_METRICS_PORT: String(port), LOG_FORMAT: 'json', REBALANCER_THRESHOLD: '100' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  worker.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  worker.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  await eventually('the worker to be ready', async () => {
    if (worker.exitCode !== null) throw new Error(`the worker exited with ${worker.exitCode}: ${output.slice(-2000)}`);
    return output.includes('worker ready') ? true : undefined;
  }, 120_000);
});

afterAll(async () => {
  if (worker && worker.exitCode === null) {
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGTERM');
    await exited;
  }
  await cluster?.close();
});

/** The value of the series `name` whose labels include every one of `labels`, from Prometheus text. */
function series(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const has = Object.entries(labels).every(([k, v]) => m[2]!.includes(`${k}="${v}"`));
    if (has) return Number(m[3]);
  }
  return undefined;
}

describe("the Temporal SDK's worker metrics", () => {
  it("show a move's workflow tasks and activities on WORKER_METRICS_PORT", async () => {
    const partition = 'q-0';
    const { from, to } = await pickMove(cluster.client, partition);
    const handle = await startFollowerMove({ client, cluster: cluster.client, taskQueue }, { partition, from, to, origin: 'operator' });
    expect(await outcomeOf(handle)).toMatchObject({ status: 'completed' });

    const text = await (await fetch(metricsUrl)).text();
    const move = { task_queue: taskQueue, workflow_type: WORKFLOW_TYPE['follower-move'] };
    expect(series(text, 'temporal_workflow_completed_total', move), 'the completed move').toBeGreaterThanOrEqual(1);
    expect(series(text, 'temporal_workflow_task_execution_latency_seconds_count', move), 'its workflow tasks').toBeGreaterThanOrEqual(1);
    // Each guarded write (add-learner, swap, remove-leaving) is one activity execution.
    expect(series(text, 'temporal_activity_execution_latency_seconds_count', { ...move, activity_type: 'guardedWrite' })).toBeGreaterThanOrEqual(2);
    expect(text).toMatch(/^# TYPE temporal_workflow_completed_total counter$/m);
  });
});

describe("the worker's log of a move", () => {
  it('has one info line at its start and one at its end, with outcome and duration, and none between', async () => {
    const partition = 'q-0';
    const { from, to } = await pickMove(cluster.client, partition);
    const handle = await startFollowerMove({ client, cluster: cluster.client, taskQueue }, { partition, from, to, origin: 'operator', reason: 'the log test' });
    expect(await outcomeOf(handle)).toMatchObject({ status: 'completed' });
    const { runId } = await handle.describe();
    // The end line goes out with the workflow task that completes the move, which the result may overtake.
    const info = await eventually('the move\'s end line', async () => {
      const lines = infoLines().filter((l) => l.workflowId === handle.workflowId && l.runId === runId);
      return lines.some((l) => l.msg.includes(' completed ')) ? infoLines() : undefined;
    });
    const mine = (l: LogLine) => l.runId === runId;
    const started = info.findIndex((l) => mine(l) && l.msg === `follower-move of ${partition} started: ${from} -> ${to} (operator)`);
    const ended = info.findIndex((l) => mine(l) && /^follower-move of q-0 completed after \d+\.\d s$/.test(l.msg));
    expect(started, info.map((l) => l.msg).join('\n')).toBeGreaterThanOrEqual(0);
    expect(info[started]).toMatchObject({ origin: 'operator', reason: 'the log test' });
    expect(ended).toBeGreaterThan(started);
    expect(info[ended]!.durationMs).toBeGreaterThan(0);
    expect(info.filter(mine).map((l) => l.msg), 'no other info line of the move').toEqual([info[started]!.msg, info[ended]!.msg]);
    expect(info.slice(started + 1, ended).map((l) => l.msg), 'no info line of anything else while it ran').toEqual([]);
  });
});

interface LogLine {
  msg: string;
  workflowId?: string;
  runId?: string;
  origin?: string;
  reason?: string;
  durationMs?: number;
}

/** The worker's info lines so far (pino level 30), in order. */
function infoLines(): LogLine[] {
  return output.split('\n').flatMap((line) => {
    try {
      const entry = JSON.parse(line) as LogLine & { level: number };
      return entry.level === 30 ? [entry] : [];
    } catch {
      return [];
    }
  });
}
