/**
 * `npm run worker`: the worker process on its own, against TEMPORAL_ADDRESS and CLUSTER_URL. Run more
 * copies on the same task queue to scale out. SIGINT/SIGTERM shut it down gracefully.
 */
import { exitOnConfigError, loadAdminEnv, loadEnv, rebalancerSettings, temporalSettings } from './config';
import { createLogger, installRuntimeLogger } from './logger';
import { createRebalancerWorker } from './worker';

const [env, settings, metricsPort] = (() => {
  try {
    const loaded = loadEnv();
    return [loaded, rebalancerSettings(loaded), loadAdminEnv().WORKER_METRICS_PORT] as const;
  } catch (err) {
    return exitOnConfigError(err);
  }
})();
const logger = createLogger(env.LOG_LEVEL, 'rebalancer', env.LOG_FORMAT);
installRuntimeLogger(logger, metricsPort ? `127.0.0.1:${metricsPort}` : undefined);
if (metricsPort) logger.info({ url: `http://127.0.0.1:${metricsPort}/metrics` }, 'Temporal SDK worker metrics');
const w = await createRebalancerWorker({
  temporal: temporalSettings(env, env.TEMPORAL_ADDRESS ?? `127.0.0.1:${env.TEMPORAL_PORT}`),
  clusterUrl: env.CLUSTER_URL ?? `http://127.0.0.1:${env.CLUSTER_PORT}`,
  clusterToken: env.CLUSTER_TOKEN,
  logger,
  rebalancer: settings,
});
await w.run();
