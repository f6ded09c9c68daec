/**
 * The admin service as `npm start` runs it: its settings (ADMIN_*, TEMPORAL_UI_URL: `loadAdminEnv` in
 * worker/config.ts), the audit log in the data directory, the real sources, and the server.
 */
import crypto from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { ClusterClient } from '../cluster/client';
import type { TopologyModel } from '../cluster/model';
import type { PlannerConfig } from '../planner/types';
import type { AdminEnv } from '../worker/config';
import { AuditLog, auditFile } from '../operations/audit';
import { HistoryStore } from './history';
import { startAdmin, type RunningAdmin } from './server';
import { createAdminDeps } from './wiring';

export interface AdminService extends RunningAdmin {
  token: string;
  /** Whether the token was generated for this run (then it must be printed). */
  generatedToken: boolean;
  dashboardUrl: string;
  metricsUrl: string;
}

export async function startAdminService(options: {
  env: AdminEnv;
  client: Client;
  cluster: ClusterClient;
  taskQueue: string;
  namespace: string;
  planner: PlannerConfig;
  /** The worker's topology model, when the worker runs in this process. */
  topology?: TopologyModel;
  dataDir: string;
  /** Where the dev server's UI is, when `npm start` runs one. */
  defaultUiUrl: string;
}): Promise<AdminService> {
  const { env } = options;
  const token = env.ADMIN_TOKEN ?? crypto.randomBytes(24).toString('base64url');
  const audit = new AuditLog(auditFile(options.dataDir));
  // The history's tables sit beside the audit log's: one SQLite file in the data directory.
  const history = new HistoryStore(auditFile(options.dataDir));
  const admin = await startAdmin({
    deps: createAdminDeps({ client: options.client, cluster: options.cluster, taskQueue: options.taskQueue, planner: options.planner, topology: options.topology }),
    audit,
    history,
    token,
    host: env.ADMIN_HOST,
    port: env.ADMIN_PORT,
    temporalUiUrl: env.TEMPORAL_UI_URL ?? options.defaultUiUrl,
    namespace: options.namespace,
  });
  return {
    ...admin,
    token,
    generatedToken: env.ADMIN_TOKEN === undefined,
    // The fragment never reaches a server: the page keeps the token for its tab and drops it from the address bar.
    dashboardUrl: `${admin.url}/#token=${token}`,
    metricsUrl: `${admin.url}/metrics`,
    async close() {
      await admin.close();
      audit.close();
      history.close();
    },
  };
}
