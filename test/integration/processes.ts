/**
 * The worker as a child process for process-fault tests, killable with SIGKILL (the cluster: cluster/spawn.ts),
 * the reference cluster and the Temporal dev server restartable on their own data, and what a test needs to
 * find the processes a run left behind (Linux /proc).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { spawnCluster } from '../../cluster/spawn';
import { freePort, startDevServer, type DevServer } from '../../scripts/dev-server';
import { ensureTemporalCli } from '../../scripts/temporal-cli';

const root = path.resolve(import.meta.dirname, '../..');

export interface Child {
  process: ChildProcess;
  kill9(): Promise<void>;
  stop(): Promise<void>;
}

/** Spawn a TypeScript entry point and wait for a stdout line that matches `ready`. */
async function spawnTs(entry: string, args: string[], env: Record<string, string>, ready: RegExp): Promise<Child> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, entry), ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  let tail = '';
  child.stderr!.on('data', (d: Buffer) => (tail = (tail + d.toString()).slice(-2000)));
  await new Promise<void>((resolve, reject) => {
    const lines = readline.createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      tail = (tail + line + '\n').slice(-2000);
      if (ready.test(line)) resolve();
    });
    child.on('exit', (code) => reject(new Error(`${entry} exited with ${code} before it was ready: ${tail}`)));
  });
  child.stdout!.resume();
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    await exited;
  };
  return { process: child, kill9: () => end('SIGKILL'), stop: () => end('SIGTERM') };
}

export function spawnWorker(env: { TEMPORAL_ADDRESS: string; TEMPORAL_NAMESPACE?: string; TEMPORAL_TASK_QUEUE: string; CLUSTER_URL: string; DATA_DIR: string }): Promise<Child> {
  return spawnTs('worker/main.ts', [], { ...env, LOG_LEVEL: 'info' }, /worker ready/);
}

export function tmpDir(name: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `rebalancer-${name}-`));
}

/** A process that keeps its address and its data across a restart. */
export interface Restartable {
  /** http://127.0.0.1:<port> for the cluster, 127.0.0.1:<port> for the dev server. */
  address: string;
  /** How many times it was restarted. */
  restarts: number;
  /** Stops it, leaves it down for `downMs`, and starts it again on its data. */
  restart(downMs?: number): Promise<void>;
  close(): Promise<void>;
}

const down = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The reference cluster as its own process on a fixed port; `restart` kills it with SIGKILL (a crash) and starts
 * it again on its database. `flags` shape a new data directory only: a restart resumes what was stored.
 */
export async function restartableCluster(flags: Record<string, string | number>): Promise<Restartable> {
  const port = await freePort();
  const dataDir = tmpDir('cluster');
  let broker = await spawnCluster(flags, { port, dataDir });
  const r: Restartable = {
    address: broker.url,
    restarts: 0,
    async restart(downMs = 0) {
      await broker.kill9();
      await down(downMs);
      broker = await spawnCluster({}, { port, dataDir });
      r.restarts++;
    },
    async close() {
      await broker.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return r;
}

/** A Temporal dev server (namespace `default`) on a fixed port; `restart` stops it and starts it again on its database. */
export async function restartableTemporal(): Promise<Restartable> {
  const executable = await ensureTemporalCli();
  const dir = tmpDir('temporal');
  const options = { executable, dbFile: path.join(dir, 'temporal.db'), port: await freePort(), uiPort: null };
  let server: DevServer = await startDevServer(options);
  const r: Restartable = {
    address: server.address,
    restarts: 0,
    async restart(downMs = 0) {
      await server.stop();
      await down(downMs);
      server = await startDevServer(options);
      r.restarts++;
    },
    async close() {
      await server.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  return r;
}

/** Parent pid of `pid` from /proc (Linux), or null once it is gone. */
function parentOf(pid: number): number | null {
  try {
    // The command name in field 2 may hold spaces and parentheses: read after its last ')'.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

function allPids(): number[] {
  return fs
    .readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number);
}

/** Every live process below `pid` (children, their children, ...). */
export function descendants(pid: number): number[] {
  const below: number[] = [];
  const parents = new Map(allPids().map((p) => [p, parentOf(p)]));
  let frontier = [pid];
  while (frontier.length > 0) {
    const next = [...parents].filter(([, parent]) => parent !== null && frontier.includes(parent)).map(([p]) => p);
    below.push(...next);
    frontier = next;
  }
  return below;
}

/** Live processes whose command line contains `text` (for example a test's own temporary directory). */
export function processesMentioning(text: string): number[] {
  return allPids().filter((pid) => {
    try {
      return pid !== process.pid && fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text);
    } catch {
      return false;
    }
  });
}

export function alive(pid: number): boolean {
  // A zombie has exited; only its parent has not collected it yet.
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}
