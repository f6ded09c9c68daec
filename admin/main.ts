/**
 * The admin service as `npm start` runs it: settings from the environment (ADMIN_*, TEMPORAL_UI_URL), the audit
 * log in the data directory, the real sources, and the server. A bad setting is refused with its name.
 */
import crypto from 'node:crypto';
import type { Client } from '@temporalio/client';
import { z } from 'zod';
import type { ClusterClient } from '../cluster/client';
import type { PlannerConfig } from '../planner/types';
import { ConfigError } from '../worker/config';
import { AuditLog, auditFile } from './audit';
import { HistoryStore } from './history';
import { startAdmin, type RunningAdmin } from './server';
import { createAdminDeps } from './wiring';

export const AdminEnvSchema = z.object({
  ADMIN_HOST: z.string().min(1, 'expected a host to listen on, for example 127.0.0.1').default('127.0.0.1'),
  ADMIN_PORT: z.coerce.number().int().min(0).max(65535).default(7390),
  /** Unset: a token is generated for this run and printed. */
  ADMIN_TOKEN: z.string().min(16, 'expected at least 16 characters').optional(),
  /** The Temporal Web UI that move links point at; the dev server's UI by default. */
  TEMPORAL_UI_URL: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL, for example http://127.0.0.1:8233' }).optional(),
  /** The Temporal SDK's worker metrics (Prometheus) on 127.0.0.1; `npm start` defaults it, `npm run worker` serves them only when set. */
  WORKER_METRICS_PORT: z.coerce.number().int().min(1).max(65535).optional(),
});
export type AdminEnv = z.infer<typeof AdminEnvSchema>;

export function loadAdminEnv(source: NodeJS.ProcessEnv = process.env): AdminEnv {
  const input = Object.fromEntries(Object.keys(AdminEnvSchema.shape).flatMap((k) => (source[k] ? [[k, source[k]]] : [])));
  const parsed = AdminEnvSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const key = String(issue.path[0]);
  throw new ConfigError(`${key}=${JSON.stringify(source[key] ?? '')} is invalid: ${issue.message}`);
}

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
    deps: createAdminDeps({ client: options.client, cluster: options.cluster, taskQueue: options.taskQueue, planner: options.planner }),
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
