/**
 * The product as `npm start` runs it, for the benchmarks that measure it end to end (settle, scale): the wall-clock
 * reference cluster as its own process, then `npm start`'s own process pointed at it (its Temporal dev server, the
 * worker with the progress relay and the rebalancer loop at the default REBALANCER_* settings, the admin API), and
 * the `rebalancer` CLI as an operator runs it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { ClusterClient } from '../cluster/client';
import { spawnCluster, type SpawnedCluster } from '../cluster/spawn';
import { relayScope } from '../operations/relay';
import { freePort } from '../scripts/dev-server';
import { onPath, PROJECT_ROOT } from '../scripts/temporal-cli';

const START_TIMEOUT_MS = 180_000;
const TASK_QUEUE = 'rebalancer';

export interface Product {
  cluster: ClusterClient;
  clusterUrl: string;
  temporal: string;
  client: Client;
  scope: string;
  dir: string;
  log: string;
  /** The start process (its pid holds the worker, the loop and the admin service) and the admin API's port. */
  pid: number;
  adminPort: number;
  close(): Promise<void>;
}

/** The environment the product's processes get: the caller's, less every setting this benchmark must not inherit. */
export function productEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(REBALANCER_|TEMPORAL_|CLUSTER_|ADMIN_|WORKER_METRICS_|DATA_DIR$|LOG_)/.test(k)) env[k] = v;
  return { ...env, LOG_FORMAT: 'json', ...extra };
}

/**
 * `node --import tsx scripts/start.ts`, as `npm start` execs it. Where util-linux's setpriv exists, the kernel stops
 * it when this process dies, as the dev server is stopped (exit-with-parent.ts cannot be preloaded here: the SDK's
 * workflow thread inherits the flag without tsx).
 */
function startProcess(env: NodeJS.ProcessEnv, out: WriteStream): ChildProcess {
  const command = [process.execPath, '--import', 'tsx', 'scripts/start.ts'];
  const setpriv = onPath('setpriv');
  const [file, ...args] = setpriv ? [setpriv, '--pdeathsig', 'TERM', '--', ...command] : command;
  const child = spawn(file!, args, { cwd: PROJECT_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.pipe(out, { end: false });
  child.stderr!.pipe(out, { end: false });
  return child;
}

export async function startProduct(
  label: string,
  shape: Record<string, string | number>,
  say: (line: string) => void,
  options: { env?: Record<string, string>; startTimeoutMs?: number; clusterStartTimeoutMs?: number } = {},
): Promise<Product> {
  const startTimeoutMs = options.startTimeoutMs ?? START_TIMEOUT_MS;
  const dir = mkdtempSync(path.join(tmpdir(), `${label}-`));
  const log = path.join(dir, 'product.log');
  const out = createWriteStream(log);
  let cluster: SpawnedCluster | undefined;
  let start: ChildProcess | undefined;
  let connection: Connection | undefined;
  const close = async () => {
    await connection?.close().catch(() => undefined);
    if (start && start.exitCode === null && start.signalCode === null) {
      const exited = new Promise((r) => start!.once('exit', r));
      start.kill('SIGTERM');
      const timer = setTimeout(() => start!.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    }
    await cluster?.close();
    out.end();
  };
  try {
    cluster = await spawnCluster(shape, {
      dataDir: path.join(dir, 'cluster'),
      output: (chunk) => out.write(chunk),
      ...(options.clusterStartTimeoutMs === undefined ? {} : { startTimeoutMs: options.clusterStartTimeoutMs }),
    });
    const [temporalPort, uiPort, adminPort, metricsPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const env = productEnv({
      CLUSTER_URL: cluster.url,
      TEMPORAL_PORT: String(temporalPort),
      TEMPORAL_UI_PORT: String(uiPort),
      ADMIN_PORT: String(adminPort),
      WORKER_METRICS_PORT: String(metricsPort),
      DATA_DIR: dir,
      ...options.env,
    });
    say(`${label}: cluster/main.ts ${Object.entries(shape).map(([k, v]) => `--${k} ${v}`).join(' ')} at ${cluster.url}`);
    say(`${label}: CLUSTER_URL=${cluster.url} TEMPORAL_PORT=${temporalPort} DATA_DIR=${dir}${Object.entries(options.env ?? {}).map(([k, v]) => ` ${k}=${v}`).join('')} node --import tsx scripts/start.ts${Object.keys(options.env ?? {}).some((k) => k.startsWith('REBALANCER_')) ? '' : ' (no REBALANCER_* set: the defaults)'}; logs in ${log}`);
    start = startProcess(env, out);
    const started = start;
    await new Promise<void>((resolve, reject) => {
      let seen = '';
      const timer = setTimeout(() => reject(new Error(`npm start did not report running within ${startTimeoutMs / 1000} s; see ${log}`)), startTimeoutMs);
      started.stdout!.on('data', (chunk: Buffer) => {
        seen = (seen + chunk.toString()).slice(-2000);
        if (seen.includes('live rebalancer is running')) {
          clearTimeout(timer);
          resolve();
        }
      });
      started.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`npm start exited (${code}) before it ran; see ${log}`));
      });
    });
    const temporal = `127.0.0.1:${temporalPort}`;
    connection = await Connection.connect({ address: temporal });
    return {
      cluster: new ClusterClient(cluster.url),
      clusterUrl: cluster.url,
      temporal,
      client: new Client({ connection }),
      scope: relayScope(cluster.url, TASK_QUEUE),
      dir,
      log,
      pid: started.pid!,
      adminPort,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * `rebalancer <args>` as an operator types it, against this product; resolves with its stdout, rejects on a failure.
 * `say` shows the command line first.
 */
export async function cli(p: Product, args: string[], say?: (line: string) => void): Promise<string> {
  say?.(`$ rebalancer ${args.map((a) => (a.includes(' ') ? JSON.stringify(a) : a)).join(' ')}`);
  const out = createWriteStream(path.join(p.dir, 'cli.log'), { flags: 'a' });
  const child = spawn(process.execPath, ['bin/rebalancer.mjs', ...args], {
    cwd: PROJECT_ROOT,
    // The same environment as the product's: the CLI finds its admin service as an operator's would.
    env: productEnv({ TEMPORAL_ADDRESS: p.temporal, CLUSTER_URL: p.clusterUrl, DATA_DIR: p.dir, ADMIN_PORT: String(p.adminPort) }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.pipe(out);
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  out.end();
  if (code !== 0) throw new Error(`rebalancer ${args[0]} exited ${code}: ${stdout.trim()} (see ${path.join(p.dir, 'cli.log')})`);
  return stdout;
}

