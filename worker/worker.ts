/** Builds the worker (workflows + activities) on one connection and joins the broker's progress relay. */
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import { createActivities, type ActivityDeps } from '../activities';
import { createRebalancerActivities, type RebalancerDeps } from '../activities/rebalancer';
import { createRelayActivities, type RelayDeps } from '../activities/relay';
import { ensureRebalancer } from '../operations/rebalancer';
import { planNow } from '../planner';
import type { RebalancerSettings } from '../rules/definitions';
import { ClusterClient } from '../cluster/client';
import { TopologyModel } from '../cluster/model';
import type { RelayTuning } from '../rules/relay';
import type { TemporalSettings } from './config';
import { ensureRelay, relayScope } from '../operations/relay';

export const WORKFLOWS_PATH = path.resolve(import.meta.dirname, '../workflows/index.ts');

export interface RebalancerWorkerOptions {
  temporal: TemporalSettings;
  clusterUrl: string;
  clusterToken?: string;
  logger: Logger;
  /** Tests wrap the broker client the activities use, to inject faults around guarded writes. */
  wrapActivityCluster?: (cluster: ClusterClient) => ActivityDeps['cluster'];
  /** Relay tuning for tests and benchmarks; it applies only when this worker is the one that starts the relay. */
  relayTuning?: Partial<RelayTuning>;
  /** Test-only hook inside the relay activity (see RelayDeps). */
  relayAfterSignal?: RelayDeps['afterSignal'];
  /**
   * The rebalancer loop's settings: given, this worker starts the loop (or joins the running one, as for the
   * relay) and drains started without settings use them.
   */
  rebalancer?: RebalancerSettings;
  /** Tests replace the planner the rebalancer's activities call. */
  plan?: RebalancerDeps['plan'];
  /** Tests add workflow interceptor modules (paths), for schedules the SDK rarely takes by itself. */
  workflowInterceptorModules?: string[];
}

export interface RebalancerWorker {
  worker: Worker;
  client: Client;
  /** Workflow id of the broker's progress relay. */
  relayWorkflowId: string;
  /** The topology as the loop reads it, for an admin service in the same process to share (one model, not two). */
  topology: TopologyModel;
  /** Workflow id of the rebalancer loop, when this worker was given its settings. */
  rebalancerWorkflowId: string | null;
  /** Runs until shutdown() or a shutdown signal; resolves when everything stopped. */
  run(): Promise<void>;
  shutdown(): void;
}

export async function createRebalancerWorker(options: RebalancerWorkerOptions): Promise<RebalancerWorker> {
  const { temporal, logger } = options;
  const connectOptions = { address: temporal.address, tls: temporal.tls, apiKey: temporal.apiKey };
  const nativeConnection = await NativeConnection.connect(connectOptions);
  const clientConnection = await Connection.connect(connectOptions);
  const client = new Client({ connection: clientConnection, namespace: temporal.namespace });
  const cluster = new ClusterClient(options.clusterUrl, { token: options.clusterToken });
  // The loop's and drains' reads of the whole topology: kept current from the broker's changes read.
  const model = new TopologyModel(cluster, { log: logger.child({ component: 'topology' }) });
  const worker = await Worker.create({
    connection: nativeConnection,
    namespace: temporal.namespace,
    taskQueue: temporal.taskQueue,
    workflowsPath: WORKFLOWS_PATH,
    ...(options.workflowInterceptorModules ? { interceptors: { workflowModules: options.workflowInterceptorModules } } : {}),
    activities: {
      ...createActivities({ cluster: options.wrapActivityCluster?.(cluster) ?? cluster, logger }),
      ...createRelayActivities({ cluster, client, logger, afterSignal: options.relayAfterSignal }),
      ...createRebalancerActivities({
        cluster: { topology: () => model.read(), syncBudget: () => cluster.syncBudget() },
        setDraining: (node, draining, reason) => cluster.setDraining(node, draining, reason),
        client,
        plan: options.plan ?? planNow,
        settings: options.rebalancer,
        logger,
      }),
    },
    // The dev server and one worker share two cores with the broker: keep the sticky cache modest.
    maxCachedWorkflows: 1000,
    // The relay's cursor reaches the server every 2 s (not at 80% of its heartbeat timeout), so a busy
    // machine does not time the relay out and a successor repeats little.
    maxHeartbeatThrottleInterval: '2s',
  });
  const relay = await ensureRelay(client, temporal.taskQueue, cluster.baseUrl, options.relayTuning);
  const loop = options.rebalancer ? await ensureRebalancer(client, temporal.taskQueue, relayScope(cluster.baseUrl, temporal.taskQueue), options.rebalancer) : null;
  return {
    worker,
    client,
    relayWorkflowId: relay,
    rebalancerWorkflowId: loop,
    topology: model,
    async run() {
      logger.info({ taskQueue: temporal.taskQueue, namespace: temporal.namespace, address: temporal.address, relay, rebalancer: loop }, 'worker ready');
      try {
        await worker.run();
      } finally {
        await clientConnection.close();
        await nativeConnection.close();
        logger.info('worker stopped');
      }
    },
    shutdown() {
      // A shutdown signal may have stopped it already (the runtime listens for SIGINT/SIGTERM too).
      if (worker.getState() === 'RUNNING') worker.shutdown();
    },
  };
}
