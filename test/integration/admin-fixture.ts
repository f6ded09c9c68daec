/**
 * The admin API on a real reference cluster, a real worker on its own task queue and the shared dev server, for
 * the admin, dashboard and metrics tests. Each test file names its own partitions (workflow ids are shared across
 * files on one dev server), created on a cluster started without any.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { AuditLog, auditFile } from '../../operations/audit';
import { HistoryStore } from '../../admin/history';
import type { AdminDeps } from '../../admin/deps';
import { startAdmin, type RunningAdmin } from '../../admin/server';
import { createAdminDeps } from '../../admin/wiring';
import type { SimConfig } from '../../cluster/sim/types';
import { DEFAULT_PLANNER_CONFIG } from '../../planner';
import type { PlannerConfig } from '../../planner/types';
import { rebalancerStatusQuery } from '../../rules/definitions';
import { createRebalancerWorker } from '../../worker/worker';
import { connectClient, eventually, logger, startTestCluster, temporalAddress, temporalNamespace, TEST_RELAY_TUNING, type TestCluster } from './helpers';

export const TOKEN = 'test-admin-token-0123456789';

export interface AdminFixture {
  cluster: TestCluster;
  client: Client;
  deps: AdminDeps;
  admin: RunningAdmin;
  dataDir: string;
  /** Stops the admin server and closes its audit log and history, then starts them again on the same data directory. */
  restartAdmin(host?: string): Promise<RunningAdmin>;
  startAdminOn(host: string): Promise<RunningAdmin>;
  /** Another admin server on the same data, with these deps (the fixture's own changed where a test needs). */
  startAdminWith(deps: AdminDeps): Promise<RunningAdmin>;
  close(): Promise<void>;
}

export async function startAdminFixture(options: {
  name: string;
  partitions: string[];
  nodes?: number;
  config?: Partial<SimConfig>;
  planner?: Partial<PlannerConfig>;
  /** How often the admin samples its history (its own default unless said). */
  historyIntervalMs?: number;
}): Promise<AdminFixture> {
  const cluster = await startTestCluster(options.config ?? {}, { nodes: options.nodes ?? 5, partitions: 0, streams: 0 });
  const client = await connectClient();
  const taskQueue = `${options.name}-${process.pid}`;
  const planner = { ...DEFAULT_PLANNER_CONFIG, ...options.planner };
  // The real rebalancer loop, started while the cluster has no partition and ticking once an hour: it plans on a
  // node event or a resume only, so the moves these tests request by hand are theirs alone until then.
  const w = await createRebalancerWorker({
    temporal: { address: temporalAddress(), namespace: temporalNamespace(), taskQueue },
    clusterUrl: cluster.url,
    logger,
    relayTuning: TEST_RELAY_TUNING,
    rebalancer: { planner, tickMs: 3_600_000, ticksPerRun: 100 },
  });
  const running = w.run();
  // Its first tick reads the cluster: the partitions come after it, or the loop may plan their moves at once.
  const loop = client.workflow.getHandle(w.rebalancerWorkflowId!);
  await eventually('the loop\'s first tick', async () => ((await loop.query(rebalancerStatusQuery)).lastPlan !== null ? true : undefined));
  for (const [i, id] of options.partitions.entries()) {
    const n = options.nodes ?? 5;
    await cluster.client.createPartition({ id, replicas: [0, 1, 2].map((k) => `n${((i + k) % n) + 1}`) });
  }
  const deps = createAdminDeps({ client, cluster: cluster.client, taskQueue, planner });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `${options.name}-`));
  let audit = new AuditLog(auditFile(dataDir));
  let history = new HistoryStore(auditFile(dataDir));
  const open = (host = '127.0.0.1', withDeps = deps) =>
    startAdmin({ deps: withDeps, audit, history, historyIntervalMs: options.historyIntervalMs, token: TOKEN, host, port: 0, temporalUiUrl: 'http://127.0.0.1:8233', namespace: temporalNamespace() });
  const fixture: AdminFixture = {
    cluster,
    client,
    deps,
    admin: await open(),
    dataDir,
    async restartAdmin() {
      await fixture.admin.close();
      audit.close();
      history.close();
      audit = new AuditLog(auditFile(dataDir));
      history = new HistoryStore(auditFile(dataDir));
      fixture.admin = await open();
      return fixture.admin;
    },
    startAdminOn: (host) => open(host),
    startAdminWith: (withDeps) => open('127.0.0.1', withDeps),
    async close() {
      await fixture.admin.close();
      audit.close();
      history.close();
      w.shutdown();
      await running;
      await cluster.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return fixture;
}

/** A request to the admin API; `token` false sends none. */
export async function call(
  base: string,
  method: 'GET' | 'POST',
  url: string,
  options: { body?: unknown; token?: string | false; headers?: Record<string, string>; raw?: string } = {},
): Promise<{ status: number; body: Record<string, unknown> & { message?: string; error?: string } }> {
  const headers: Record<string, string> = { ...options.headers };
  const token = options.token === undefined ? TOKEN : options.token;
  if (token) headers.authorization = `Bearer ${token}`;
  if (options.body !== undefined || options.raw !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(base + url, { method, headers, body: options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body)) });
  const text = await res.text();
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    body = { text };
  }
  return { status: res.status, body };
}
