/**
 * `npm start`: the whole product on one machine. A Temporal dev server (state in .data/temporal.db, Web UI
 * on TEMPORAL_UI_PORT) unless TEMPORAL_ADDRESS names one; the reference cluster (state in .data/cluster)
 * unless CLUSTER_URL names a broker; then the worker with its progress relay. The embedded cluster starts
 * balanced, and a node joins it DEMO_JOIN_MS later, so a newcomer watches the rebalancer fill it. It runs as a service: a port
 * it needs that is already taken, or a DATA_DIR another run holds, stops it before it starts anything; and
 * Ctrl-C, SIGTERM, SIGINT or SIGHUP to this process (package.json execs it, so it is npm's child and npm
 * forwards SIGINT and SIGTERM) stops every child it started, the worker first.
 */
import fs from 'node:fs';
import path from 'node:path';
import { startAdminService } from '../admin/main';
import { ClusterClient } from '../cluster/client';
import { spawnCluster } from '../cluster/spawn';
import { exitOnConfigError, loadAdminEnv, loadEnv, rebalancerSettings, temporalSettings } from '../worker/config';
import { chooseLogFormat, createLogger, installRuntimeLogger, prettyEntry } from '../worker/logger';
import type { Node, Topology } from '../cluster/contract';
import { exampleMove } from '../operations/moves';
import { planToConvergence } from '../planner';
import { createRebalancerWorker } from '../worker/worker';
import { portFree, startDevServer } from './dev-server';
import { ensureTemporalCli, PROJECT_ROOT } from './temporal-cli';

const [env, settings, adminEnv] = (() => {
  try {
    const loaded = loadEnv();
    return [loaded, rebalancerSettings(loaded), loadAdminEnv()] as const;
  } catch (err) {
    return exitOnConfigError(err);
  }
})();
const logFormat = chooseLogFormat(env.LOG_FORMAT);
const logger = createLogger(env.LOG_LEVEL, 'start', logFormat);
const workerMetricsPort = adminEnv.WORKER_METRICS_PORT ?? 9464;
const dataDir = path.resolve(PROJECT_ROOT, env.DATA_DIR);

/** Aborted when stopping begins: a child still starting is stopped by its own start function. */
const stopping = new AbortController();
/**
 * How each part stops, in the order they stop: the worker first (it drains its tasks while the dev server and
 * the cluster still answer, so it logs no retried call), then the admin service, the dev server and the cluster.
 */
const STOP_ORDER = ['the worker', 'the admin service', 'the Temporal dev server', 'the reference cluster'] as const;
type Part = (typeof STOP_ORDER)[number];
const stops = new Map<Part, () => Promise<void>>();
/** SIGKILL for each child process started, for a second Ctrl-C. */
const kills: (() => void)[] = [];
let startup: Promise<unknown> = Promise.resolve();
let stoppingSince = 0;

async function stopAll(code: number, why: string): Promise<never> {
  if (stopping.signal.aborted) return new Promise<never>(() => undefined);
  stopping.abort();
  stoppingSince = Date.now();
  logger.info({ why }, 'stopping (Ctrl-C again to kill every process at once)');
  await startup;
  for (const part of STOP_ORDER) {
    const stop = stops.get(part);
    if (!stop) continue;
    logger.info(`stopping ${part}`);
    await stop().catch((err: unknown) => logger.warn({ err }, `${part} did not stop cleanly`));
  }
  unlockDataDir();
  logger.info('stopped: every process npm start ran has exited');
  process.exit(code);
}

/**
 * The children run in sessions of their own, so the terminal's Ctrl-C and SIGHUP reach this process alone
 * (and npm above it) and it stops them in order. A signal while stopping kills them at once, unless it comes
 * within a second of the first: npm forwards to us the SIGINT the terminal already sent us.
 */
function onSignal(signal: NodeJS.Signals): void {
  if (!stopping.signal.aborted) {
    void stopAll(0, signal);
    return;
  }
  if (Date.now() - stoppingSince < 1_000) return;
  logger.warn(`${signal} while stopping: killing every process at once`);
  for (const kill of kills) kill();
  unlockDataDir();
  process.exit(130);
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, onSignal);

/**
 * A child that exits while we are not stopping leaves the service broken: stop the rest. In its own session no
 * terminal signal reaches it, so only a crash, a kill from outside or its own failure ends it first.
 */
function stopIfUnexpected(what: string, code: number | null, signal: NodeJS.Signals | null): void {
  if (!stopping.signal.aborted) void stopAll(code === 0 ? 0 : 1, `${what} exited (${code ?? signal})`);
}

/**
 * Two runs on one DATA_DIR would run two dev servers on one database and two clusters on one state, whatever
 * their ports: the first run holds the directory through a file with its pid until it stops. A file whose
 * pid is gone is left from a run that was killed, and is taken over.
 */
const lockFile = path.join(dataDir, 'npm-start.pid');

function lockDataDir(): void {
  fs.mkdirSync(dataDir, { recursive: true });
  for (;;) {
    try {
      fs.writeFileSync(lockFile, String(process.pid), { flag: 'wx' });
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = Number(fs.readFileSync(lockFile, 'utf8'));
    if (Number.isInteger(holder) && holder > 0 && running(holder)) {
      throw new Error(
        `DATA_DIR ${dataDir} is in use by another npm start (pid ${holder}): stop it, or set DATA_DIR to another directory ` +
          `(if pid ${holder} is no npm start, delete ${lockFile})`,
      );
    }
    fs.rmSync(lockFile, { force: true });
  }
}

function unlockDataDir(): void {
  try {
    if (fs.readFileSync(lockFile, 'utf8') === String(process.pid)) fs.rmSync(lockFile);
  } catch {
    // Not taken (the start stopped before it locked): nothing to release.
  }
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The local ports this run would listen on, with the variable that moves each one. */
function ownPorts(): { port: number; variable: string; what: string; instead?: string }[] {
  return [
    ...(env.TEMPORAL_ADDRESS
      ? []
      : [
          { port: env.TEMPORAL_PORT, variable: 'TEMPORAL_PORT', what: 'the Temporal dev server', instead: 'TEMPORAL_ADDRESS=host:port' },
          { port: env.TEMPORAL_UI_PORT, variable: 'TEMPORAL_UI_PORT', what: "the Temporal dev server's Web UI", instead: 'TEMPORAL_ADDRESS=host:port' },
        ]),
    ...(env.CLUSTER_URL ? [] : [{ port: env.CLUSTER_PORT, variable: 'CLUSTER_PORT', what: 'the reference cluster', instead: 'CLUSTER_URL=http://host:port' }]),
    { port: adminEnv.ADMIN_PORT, variable: 'ADMIN_PORT', what: 'the admin API and dashboard' },
    { port: workerMetricsPort, variable: 'WORKER_METRICS_PORT', what: "the Temporal SDK's worker metrics" },
  ];
}

/** Refuse to start beside whatever holds a port we need: we must never talk to a server we did not start. */
async function refuseTakenPorts(): Promise<void> {
  const taken = [];
  for (const p of ownPorts()) if (!(await portFree(p.port))) taken.push(p);
  if (taken.length === 0) return;
  throw new Error(
    taken
      .map((p) => `port ${p.port} for ${p.what} is already in use: set ${p.variable} to a free port${p.instead ? `, or ${p.instead} to use a server that is already running` : ''}`)
      .join('; '),
  );
}

async function startTemporal(): Promise<string> {
  if (env.TEMPORAL_ADDRESS) {
    logger.info({ address: env.TEMPORAL_ADDRESS }, 'using the Temporal server at TEMPORAL_ADDRESS');
    return env.TEMPORAL_ADDRESS;
  }
  const executable = await ensureTemporalCli((line) => logger.info(line), stopping.signal);
  const server = await startDevServer({
    executable,
    dbFile: path.join(dataDir, 'temporal.db'),
    port: env.TEMPORAL_PORT,
    uiPort: env.TEMPORAL_UI_PORT,
    namespaces: [env.TEMPORAL_NAMESPACE],
    log: (line) => logger.info(line),
    signal: stopping.signal,
  });
  stops.set('the Temporal dev server', () => server.stop());
  kills.push(() => server.process.kill('SIGKILL'));
  server.process.once('exit', (code, signal) => stopIfUnexpected('the Temporal dev server', code, signal));
  return server.address;
}

/**
 * The embedded cluster's shape: 15 partitions (14 queues, 1 stream) of 3 copies on 5 nodes puts 9 copies and 3
 * owners on each, so every score is at the mean and nothing moves until the demo's node joins. (The cluster's
 * own default, 13 partitions, starts 0.15 off the mean against a threshold of 0.1, and moves at once.) 30,000
 * messages of history (30 MiB) take a copy about 15 s at the simulated transfer rate, so the node fills in minutes.
 */
const CLUSTER_SHAPE = { nodes: 5, partitions: 14, streams: 1, 'initial-messages': 30_000 };
/** The node the demo adds, in the zone that comes next in the cluster's z1, z2, z3 rotation. */
const DEMO_NODE = { id: 'n6', zone: 'z3' };
const DEMO_JOIN_MS = 20_000;

/**
 * The banner's example move: one the cluster accepts now, of a partition the loop leaves alone once the demo's node
 * has joined (by a plan on the cluster with the node added), so a newcomer who tries it while the loop fills the node
 * does not meet the loop's own move of that partition. Without the demo (CLUSTER_URL, or the node is there), any.
 */
function bannerMove(t: Topology): string | null {
  if (env.CLUSTER_URL || t.nodes.some((n) => n.id === DEMO_NODE.id)) return exampleMove(t);
  const node: Node = { id: DEMO_NODE.id, processId: `${DEMO_NODE.id}-demo`, storageInstance: `${DEMO_NODE.id}-demo`, live: true, downSince: null, capacity: 1, zone: DEMO_NODE.zone, publishRate: 0, deliveryRate: 0, draining: false };
  const joined = { ...t, nodes: [...t.nodes, node] };
  const plan = planToConvergence({ topology: joined, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: t.now }, settings.planner);
  return exampleMove(t, new Set(plan.steps.map((s) => s.partition)));
}

/** The cluster's JSON lines as this process's own: readable lines on a terminal, JSON otherwise. */
function clusterOutput(): (chunk: string) => void {
  if (logFormat === 'json') return (chunk) => process.stdout.write(chunk);
  let partial = '';
  return (chunk) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      try {
        const { service, ...entry } = JSON.parse(line) as Record<string, unknown>;
        process.stdout.write(prettyEntry({ name: service, ...entry }));
      } catch {
        process.stdout.write(`${line}\n`);
      }
    }
  };
}

/** The reference cluster as its own process; resolves with its URL once it listens. */
async function startReferenceCluster(): Promise<string> {
  if (env.CLUSTER_URL) {
    logger.info({ url: env.CLUSTER_URL }, 'using the broker at CLUSTER_URL');
    return env.CLUSTER_URL;
  }
  const cluster = await spawnCluster(
    { clock: 'wall', ...CLUSTER_SHAPE },
    { port: env.CLUSTER_PORT, dataDir: path.join(dataDir, 'cluster'), output: clusterOutput(), signal: stopping.signal },
  );
  stops.set('the reference cluster', () => cluster.close());
  kills.push(() => void cluster.kill9());
  void cluster.exited.then(({ code, signal }) => stopIfUnexpected('the reference cluster', code, signal));
  await new ClusterClient(cluster.url).health();
  return cluster.url;
}

/**
 * The demo: a node joins the embedded cluster, as an operator adding capacity would (the cluster's POST
 * /v1/nodes), and every change in what it holds is logged, so the log shows the rebalancer filling it. A
 * cluster that has the node already (a second start on the same DATA_DIR) is left as it is.
 */
async function demoJoin(cluster: ClusterClient): Promise<void> {
  if ((await cluster.nodes()).nodes.some((n) => n.id === DEMO_NODE.id)) return;
  logger.info(
    `demo: in ${DEMO_JOIN_MS / 1000} s an empty node ${DEMO_NODE.id} (zone ${DEMO_NODE.zone}) joins the cluster, as when an operator adds capacity; ` +
      `until then every node carries its share and nothing moves`,
  );
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, DEMO_JOIN_MS);
    stopping.signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
  });
  if (stopping.signal.aborted) return;
  await cluster.joinNode(DEMO_NODE.id, 1, DEMO_NODE.zone);
  logger.info(
    `demo: node ${DEMO_NODE.id} joined (POST /v1/nodes): it holds no copy, so its score is far below the mean and the rebalancer ` +
      `moves follower copies onto it, at most ${settings.planner.maxTransfersPerNode} at a time; watch the dashboard, \`npx rebalancer moves --watch\` or RebalanceTarget = "${DEMO_NODE.id}" in the Temporal UI`,
  );
  let held = '';
  while (!stopping.signal.aborted) {
    const { partitions } = await cluster.topology();
    const copies = partitions.filter((p) => p.owner === DEMO_NODE.id || p.followers.includes(DEMO_NODE.id));
    const now = copies.map((p) => p.id).join(', ');
    if (now !== held) {
      held = now;
      logger.info(`demo: ${DEMO_NODE.id} holds ${copies.length} cop${copies.length === 1 ? 'y' : 'ies'} now (${now})`);
    }
    await new Promise((r) => setTimeout(r, 2_000));
  }
}

try {
  lockDataDir();
  await refuseTakenPorts();
  // Installing the runtime binds the SDK's metrics port: only once the check above found it free.
  installRuntimeLogger(logger, `127.0.0.1:${workerMetricsPort}`);
  const starts = [startTemporal(), startReferenceCluster()] as const;
  // stopAll waits for both starts to settle, so a child that is still starting is never left behind.
  startup = Promise.allSettled(starts);
  const [address, clusterUrl] = await Promise.all(starts);
  // The embedded cluster inherits CLUSTER_TOKEN from this process's environment, so every client here sends it.
  const cluster = new ClusterClient(clusterUrl, { token: env.CLUSTER_TOKEN });
  const worker = await createRebalancerWorker({
    temporal: temporalSettings(env, address),
    clusterUrl,
    clusterToken: env.CLUSTER_TOKEN,
    logger,
    rebalancer: settings,
  });
  const running = worker.run();
  stops.set('the worker', async () => {
    worker.shutdown();
    await running;
  });
  const admin = await startAdminService({
    env: adminEnv,
    client: worker.client,
    cluster,
    taskQueue: env.TEMPORAL_TASK_QUEUE,
    namespace: env.TEMPORAL_NAMESPACE,
    planner: settings.planner,
    topology: worker.topology,
    dataDir,
    defaultUiUrl: `http://127.0.0.1:${env.TEMPORAL_UI_PORT}`,
  });
  stops.set('the admin service', () => admin.close());
  const ui = env.TEMPORAL_ADDRESS ? adminEnv.TEMPORAL_UI_URL ?? '(your Temporal cluster\'s UI)' : `http://127.0.0.1:${env.TEMPORAL_UI_PORT}`;
  process.stdout.write(
    `\nlive rebalancer is running\n` +
      `  dashboard:          ${admin.dashboardUrl}\n` +
      (admin.generatedToken ? `  admin token:        ${admin.token} (generated for this run; set ADMIN_TOKEN to keep one)\n` : '') +
      `  Temporal UI:        ${ui}\n` +
      `  metrics:            ${admin.metricsUrl} (service), http://127.0.0.1:${workerMetricsPort}/metrics (Temporal SDK worker)\n` +
      `  Temporal server:    ${address} (namespace ${env.TEMPORAL_NAMESPACE}, task queue ${env.TEMPORAL_TASK_QUEUE})\n` +
      `  reference cluster:  ${clusterUrl} (topology: ${clusterUrl}/v1/topology)\n` +
      `  watch:              npx rebalancer moves --watch\n` +
      `  try:                npx ${(await cluster.topology().then(bannerMove, () => null)) ?? 'rebalancer moves'}\n` +
      `  stop:               Ctrl-C, or SIGTERM to pid ${process.pid} (Ctrl-C twice: kill at once)\n\n`,
  );
  if (!env.CLUSTER_URL) {
    void demoJoin(cluster).catch((err: unknown) => {
      if (!stopping.signal.aborted) logger.warn({ err: (err as Error).message }, 'demo: the node join failed; the rest runs on');
    });
  }
  await running;
  await stopAll(1, 'the worker stopped');
} catch (err) {
  if (!stopping.signal.aborted) logger.error({ err: (err as Error).message }, 'start failed');
  await stopAll(1, 'start failed');
}
