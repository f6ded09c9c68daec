/**
 * `npm start`: the whole product on one machine. A Temporal dev server (state in .data/temporal.db, Web UI
 * on TEMPORAL_UI_PORT) unless TEMPORAL_ADDRESS names one; the reference cluster (state in .data/cluster)
 * unless CLUSTER_URL names a broker; then the worker with its progress relay. Ctrl-C stops everything.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ClusterClient } from '../cluster/client';
import { spawnCluster } from '../cluster/spawn';
import { exitOnConfigError, loadEnv, temporalSettings } from '../worker/config';
import { createLogger, installRuntimeLogger } from '../worker/logger';
import { createRebalancerWorker } from '../worker/worker';
import { startDevServer, type DevServer } from './dev-server';
import { ensureTemporalCli, PROJECT_ROOT } from './temporal-cli';

const env = (() => {
  try {
    return loadEnv();
  } catch (err) {
    return exitOnConfigError(err);
  }
})();
const logger = createLogger(env.LOG_LEVEL, 'start');
installRuntimeLogger(logger);
const dataDir = path.resolve(PROJECT_ROOT, env.DATA_DIR);
fs.mkdirSync(dataDir, { recursive: true });

const stops: (() => Promise<void>)[] = [];
let stopping = false;
async function stopAll(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    logger.info('stopping');
    for (const stop of stops.reverse()) await stop().catch((err: unknown) => logger.warn({ err }, 'stop failed'));
    logger.info('stopped');
  }
  process.exit(code);
}
process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));

async function startTemporal(): Promise<string> {
  if (env.TEMPORAL_ADDRESS) {
    logger.info({ address: env.TEMPORAL_ADDRESS }, 'using the Temporal server at TEMPORAL_ADDRESS');
    return env.TEMPORAL_ADDRESS;
  }
  const executable = await ensureTemporalCli((line) => logger.info(line));
  const server: DevServer = await startDevServer({
    executable,
    dbFile: path.join(dataDir, 'temporal.db'),
    port: env.TEMPORAL_PORT,
    uiPort: env.TEMPORAL_UI_PORT,
    namespace: env.TEMPORAL_NAMESPACE,
    log: (line) => logger.info(line),
  });
  stops.push(() => server.stop());
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
    { port: env.CLUSTER_PORT, dataDir: path.join(dataDir, 'cluster'), output: (chunk) => process.stdout.write(chunk) },
  );
  stops.push(() => cluster.close());
  await new ClusterClient(cluster.url).health();
  return cluster.url;
}

try {
  const [address, clusterUrl] = await Promise.all([startTemporal(), startReferenceCluster()]);
  const worker = await createRebalancerWorker({
    temporal: temporalSettings(env, address),
    clusterUrl,
    clusterToken: env.CLUSTER_TOKEN,
    logger,
  });
  const running = worker.run();
  stops.push(async () => {
    worker.shutdown();
    await running;
  });
  const ui = env.TEMPORAL_ADDRESS ? '(your Temporal cluster\'s UI)' : `http://127.0.0.1:${env.TEMPORAL_UI_PORT}`;
  process.stdout.write(
    `\nlive rebalancer is running\n` +
      `  Temporal UI:        ${ui}\n` +
      `  Temporal server:    ${address} (namespace ${env.TEMPORAL_NAMESPACE}, task queue ${env.TEMPORAL_TASK_QUEUE})\n` +
      `  reference cluster:  ${clusterUrl} (topology: ${clusterUrl}/v1/topology)\n` +
      `  try:                npx rebalancer move q-0 --from n2 --to n4 --wait\n` +
      `  stop:               Ctrl-C\n\n`,
  );
  await running;
} catch (err) {
  logger.error({ err: (err as Error).message }, 'start failed');
  await stopAll(1);
}
