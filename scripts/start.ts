/**
 * `npm start`: the whole product on one machine. A Temporal dev server (state in .data/temporal.db, Web UI
 * on TEMPORAL_UI_PORT) unless TEMPORAL_ADDRESS names one; the reference cluster (state in .data/cluster)
 * unless CLUSTER_URL names a broker; then the worker with its progress relay. It runs as a service: a port
 * it needs that is already taken, or a DATA_DIR another run holds, stops it before it starts anything; and
 * SIGTERM or SIGINT to this process (package.json execs it, so it is npm's child and npm forwards both)
 * stops every child it started.
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadAdminEnv, startAdminService } from '../admin/main';
import { ClusterClient } from '../cluster/client';
import { spawnCluster } from '../cluster/spawn';
import { exitOnConfigError, loadEnv, rebalancerSettings, temporalSettings } from '../worker/config';
import { createLogger, installRuntimeLogger } from '../worker/logger';
import { exampleMove } from '../client/moves';
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
const logger = createLogger(env.LOG_LEVEL, 'start', env.LOG_FORMAT);
const workerMetricsPort = adminEnv.WORKER_METRICS_PORT ?? 9464;
const dataDir = path.resolve(PROJECT_ROOT, env.DATA_DIR);

/** Aborted when stopping begins: a child still starting is stopped by its own start function. */
const stopping = new AbortController();
const stops: (() => Promise<void>)[] = [];
let startup: Promise<unknown> = Promise.resolve();

async function stopAll(code: number, why: string): Promise<never> {
  if (stopping.signal.aborted) return new Promise<never>(() => undefined);
  stopping.abort();
  logger.info({ why }, 'stopping');
  await startup;
  for (const stop of stops.reverse()) await stop().catch((err: unknown) => logger.warn({ err }, 'stop failed'));
  unlockDataDir();
  logger.info('stopped: every process npm start ran has exited');
  process.exit(code);
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void stopAll(0, signal));

/**
 * A child that exits while we are not stopping leaves the service broken: stop the rest. A clean exit (0) is
 * a child that was told to stop, as Ctrl-C tells the whole process group, possibly before it tells us.
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
  stops.push(() => server.stop());
  server.process.once('exit', (code, signal) => stopIfUnexpected('the Temporal dev server', code, signal));
  return server.address;
}

/** The reference cluster as its own process; resolves with its URL once it listens. */
async function startReferenceCluster(): Promise<string> {
  if (env.CLUSTER_URL) {
    logger.info({ url: env.CLUSTER_URL }, 'using the broker at CLUSTER_URL');
    return env.CLUSTER_URL;
  }
  const cluster = await spawnCluster(
    { clock: 'wall' },
    { port: env.CLUSTER_PORT, dataDir: path.join(dataDir, 'cluster'), output: (chunk) => process.stdout.write(chunk), signal: stopping.signal },
  );
  stops.push(() => cluster.close());
  void cluster.exited.then(({ code, signal }) => stopIfUnexpected('the reference cluster', code, signal));
  await new ClusterClient(cluster.url).health();
  return cluster.url;
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
  const worker = await createRebalancerWorker({
    temporal: temporalSettings(env, address),
    clusterUrl,
    clusterToken: env.CLUSTER_TOKEN,
    logger,
    rebalancer: settings,
  });
  const running = worker.run();
  stops.push(async () => {
    worker.shutdown();
    await running;
  });
  const admin = await startAdminService({
    env: adminEnv,
    client: worker.client,
    cluster: new ClusterClient(clusterUrl, { token: env.CLUSTER_TOKEN }),
    taskQueue: env.TEMPORAL_TASK_QUEUE,
    namespace: env.TEMPORAL_NAMESPACE,
    planner: settings.planner,
    dataDir,
    defaultUiUrl: `http://127.0.0.1:${env.TEMPORAL_UI_PORT}`,
  });
  stops.push(() => admin.close());
  const ui = env.TEMPORAL_ADDRESS ? adminEnv.TEMPORAL_UI_URL ?? '(your Temporal cluster\'s UI)' : `http://127.0.0.1:${env.TEMPORAL_UI_PORT}`;
  process.stdout.write(
    `\nlive rebalancer is running\n` +
      `  dashboard:          ${admin.dashboardUrl}\n` +
      (admin.generatedToken ? `  admin token:        ${admin.token} (generated for this run; set ADMIN_TOKEN to keep one)\n` : '') +
      `  Temporal UI:        ${ui}\n` +
      `  metrics:            ${admin.metricsUrl} (service), http://127.0.0.1:${workerMetricsPort}/metrics (Temporal SDK worker)\n` +
      `  Temporal server:    ${address} (namespace ${env.TEMPORAL_NAMESPACE}, task queue ${env.TEMPORAL_TASK_QUEUE})\n` +
      `  reference cluster:  ${clusterUrl} (topology: ${clusterUrl}/v1/topology)\n` +
      `  try:                npx ${(await new ClusterClient(clusterUrl, { token: env.CLUSTER_TOKEN }).topology().then(exampleMove, () => null)) ?? 'rebalancer moves'}\n` +
      `  stop:               Ctrl-C, or SIGTERM to pid ${process.pid}\n\n`,
  );
  await running;
  await stopAll(1, 'the worker stopped');
} catch (err) {
  if (!stopping.signal.aborted) logger.error({ err: (err as Error).message }, 'start failed');
  await stopAll(1, 'start failed');
}
