/** Shared set-up for integration tests: a worker of this project on the real dev server, a client, a logger. */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { runCli } from '../../client/cli';
import { outcomeOf as clientOutcomeOf, type MovesContext } from '../../operations/moves';
import { expect, inject } from 'vitest';
import pino from 'pino';
import { ClusterClient } from '../../cluster/client';
import type { Partition } from '../../cluster/contract';
import { startCluster, type RunningCluster } from '../../cluster/server';
import type { SimConfig } from '../../cluster/sim/types';
import { createRebalancerWorker, WORKFLOWS_PATH, type RebalancerWorker, type RebalancerWorkerOptions } from '../../worker/worker';
import { Worker } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import { installRuntimeLogger } from '../../worker/logger';
import { relayScope } from '../../operations/relay';
import type { MoveOutcome, RebalancerSettings } from '../../rules/definitions';
import { holders } from '../../rules/rebalancer-rules';
import { withHistoryExcerpt } from './history-excerpt';
import { testFileNamespace } from './namespaces';

export const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'error' });
installRuntimeLogger(logger);

export function temporalAddress(): string {
  return inject('temporalAddress');
}

/**
 * This test file's namespace on the shared dev server: workflow ids are `reconfigure-<partition>`, so files whose
 * clusters both have a q-1 would otherwise refuse or follow each other's moves. A server named by
 * TEMPORAL_ADDRESS has only `default`.
 */
export function temporalNamespace(): string {
  if (!inject('namespacePerFile')) return 'default';
  const file = expect.getState().testPath;
  if (!file) throw new Error('temporalNamespace() is for test files: call it in a hook or a test');
  return testFileNamespace(file);
}

/** TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE for a CLI, worker or admin server of this test file. */
export function temporalEnv(): { TEMPORAL_ADDRESS: string; TEMPORAL_NAMESPACE: string } {
  return { TEMPORAL_ADDRESS: temporalAddress(), TEMPORAL_NAMESPACE: temporalNamespace() };
}

/** A client of the shared dev server in this file's namespace, or of another server (its `default`). */
export async function connectClient(address?: string): Promise<Client> {
  const connection = await Connection.connect({ address: address ?? temporalAddress() });
  return new Client({ connection, namespace: address === undefined ? temporalNamespace() : 'default' });
}

/** Relay timing for tests: quick progress, and a killed worker's relay run moves on within seconds. */
export const TEST_RELAY_TUNING = { heartbeatTimeoutMs: 5_000, runMs: 20_000, pollWaitMs: 500, progressIntervalMs: 500, batchMs: 50 };

/** A worker on its own task queue, so test files running side by side do not take each other's tasks. */
export async function startWorker(
  clusterUrl: string,
  taskQueue: string,
  wrapActivityCluster?: RebalancerWorkerOptions['wrapActivityCluster'],
  address?: string,
  workflowInterceptorModules?: string[],
): Promise<{ w: RebalancerWorker; running: Promise<void> }> {
  const w = await createRebalancerWorker({
    temporal: { address: address ?? temporalAddress(), namespace: address === undefined ? temporalNamespace() : 'default', taskQueue },
    clusterUrl,
    logger,
    wrapActivityCluster,
    relayTuning: TEST_RELAY_TUNING,
    workflowInterceptorModules,
  });
  const running = w.run();
  return { w, running };
}

/** A reference cluster in this process on the wall clock, tuned so a move takes about a second. */
export async function startTestCluster(overrides: Partial<SimConfig> = {}, shape = { nodes: 6, partitions: 6, streams: 1 }): Promise<RunningCluster & { client: ClusterClient }> {
  const running = await startCluster({
    port: 0,
    clock: 'wall',
    ...shape,
    config: {
      tickMs: 50,
      initialMessages: 3_000,
      retainMessages: 1_000,
      messageBytes: 1_024,
      publishRate: 50,
      transferBytesPerSec: 4 * 1024 * 1024,
      catchUpSlack: 50,
      recoveryDelayMs: 500,
      perNodeLimit: 4,
      clusterLimit: 32,
      ...overrides,
    },
  });
  return Object.assign(running, { client: new ClusterClient(running.url) });
}

export type TestCluster = Awaited<ReturnType<typeof startTestCluster>>;

/** A test file's reference cluster, client and worker on its own task queue; `stop` ends the worker, then the cluster. */
export interface TestSuite {
  cluster: TestCluster;
  client: Client;
  ctx: MovesContext;
  relayWorkflowId: string;
  stop: () => Promise<void>;
}

export async function startSuite(
  taskQueue: string,
  options: { config?: Partial<SimConfig>; shape?: { nodes: number; partitions: number; streams: number }; wrap?: RebalancerWorkerOptions['wrapActivityCluster'] } = {},
): Promise<TestSuite> {
  const cluster = await startTestCluster(options.config, options.shape);
  const client = await connectClient();
  const { w, running } = await startWorker(cluster.url, taskQueue, options.wrap);
  const stop = async () => {
    w.shutdown();
    await running;
    await cluster.close();
  };
  return { cluster, client, ctx: { client, cluster: cluster.client, taskQueue }, relayWorkflowId: w.relayWorkflowId, stop };
}

/** The loop's world: a cluster of n1..n3 in z1, a worker whose rebalancer loop runs `settings`, and the CLI pointed at both. */
export interface LoopSuite {
  cluster: TestCluster;
  client: Client;
  w: RebalancerWorker;
  running: Promise<void>;
  /** The loop's scope (broker and task queue). */
  scope: string;
}

/** Twelve partitions q-<first>.. of replication factor 3 round the three nodes, then the worker and its loop. */
export async function startLoopSuite(taskQueue: string, settings: RebalancerSettings, first: number, config: Partial<SimConfig> = {}): Promise<LoopSuite> {
  const cluster = await startTestCluster(config, { nodes: 0, partitions: 0, streams: 0 });
  for (const id of ['n1', 'n2', 'n3']) await cluster.client.joinNode(id, 1, 'z1');
  for (let i = 0; i < 12; i++) {
    const replicas = [0, 1, 2].map((k) => `n${((i + k) % 3) + 1}`);
    await cluster.client.createPartition({ id: `q-${first + i}`, replicas });
  }
  const client = await connectClient();
  const w = await createRebalancerWorker({ temporal: { address: temporalAddress(), namespace: temporalNamespace(), taskQueue }, clusterUrl: cluster.url, logger, relayTuning: TEST_RELAY_TUNING, rebalancer: settings });
  const running = w.run();
  Object.assign(process.env, { ...temporalEnv(), CLUSTER_URL: cluster.url, TEMPORAL_TASK_QUEUE: taskQueue });
  return { cluster, client, w, running, scope: relayScope(cluster.url, taskQueue) };
}

/** Ends the loop, the worker and the cluster of a LoopSuite started or half started. */
export async function stopLoopSuite(suite: Partial<LoopSuite>): Promise<void> {
  if (suite.w && suite.client && suite.running) await stopLoopWorker(suite.client, suite.w, suite.running);
  await suite.cluster?.close();
}

/** A port nothing listens on (just now): a server there does not answer. */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/** Runs `run` with `vars` set in the environment the CLI reads, then puts back what was there. */
export async function withEnv<T>(vars: Record<string, string>, run: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try {
    return await run();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** Runs the CLI in-process with its output captured. */
export async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (t) => void (out += t), err: (t) => void (err += t) });
  return { code, out, err };
}

/** The counted copies of a partition (owner and followers), sorted. */
export const counted = (p: Partition): string[] => [p.owner, ...p.followers].sort();

/** The partitions with a copy on `node`: owned, followed, learning or leaving. */
export async function copiesOn(cluster: ClusterClient, node: string): Promise<string[]> {
  return (await cluster.topology()).partitions.filter((p) => holders(p).includes(node)).map((p) => p.id);
}

/** Poll until `check` returns a value (not undefined), or fail after `timeoutMs`. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A follower of `partition` and a live node that holds no copy of it. */
export async function pickMove(cluster: ClusterClient, partition: string): Promise<{ from: string; to: string }> {
  const topology = await cluster.topology();
  const p = topology.partitions.find((x) => x.id === partition)!;
  const holders = new Set([p.owner, ...p.followers, ...p.learners, ...(p.leaving ? [p.leaving] : [])]);
  const to = topology.nodes.find((n) => n.live && !holders.has(n.id))!.id;
  return { from: p.followers[0]!, to };
}

/** Replay a workflow's history strictly under the current workflow code: a nondeterminism error fails the caller. */
export async function replayStrictly(client: Client, workflowId: string, replayName = workflowId, runId?: string) {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  try {
    await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH, replayName }, history);
  } catch (err) {
    throw withHistoryExcerpt(err, history);
  }
  return history;
}

/** Check a finished workflow's history replays under the current workflow code; optionally keep it as a fixture. */
export async function replayAndKeep(client: Client, workflowId: string, fixtureName: string, runId?: string): Promise<void> {
  const history = await replayStrictly(client, workflowId, fixtureName, runId);
  if (process.env.SAVE_HISTORIES === '1') {
    const dir = path.resolve(import.meta.dirname, '../fixtures/histories');
    fs.mkdirSync(dir, { recursive: true });
    const plain = temporal.api.history.v1.History.toObject(history as temporal.api.history.v1.History, { longs: String, enums: String, bytes: String });
    fs.writeFileSync(path.join(dir, `${fixtureName}.json`), JSON.stringify(plain));
  }
}

/**
 * How a reconfiguration ended, by the convention above MoveOutcome (rules/definitions.ts): the result of a completed
 * run, details[0] of an aborted run's ApplicationFailure or of a cancelled
 * run's CancelledFailure, or the memo of a run the server closed as Canceled.
 */
export async function outcomeOf(handle: WorkflowHandle): Promise<MoveOutcome> {
  const outcome = await clientOutcomeOf(handle);
  if (!outcome) throw new Error(`${handle.workflowId} ended without an outcome`);
  return outcome;
}

/** The rebalancer loop's current run: it changes when the loop continues as new. */
export async function loopRunId(client: Client, w: RebalancerWorker): Promise<string> {
  return (await client.workflow.getHandle(w.rebalancerWorkflowId!).describe()).runId;
}

/** Ends a test file's rebalancer loop (it outlives the worker otherwise), then the worker. */
export async function stopLoopWorker(client: Client, w: RebalancerWorker, running: Promise<void>): Promise<void> {
  await client.workflow.getHandle(w.rebalancerWorkflowId!).terminate('test file done').catch(() => undefined);
  w.shutdown();
  await running;
}
