/**
 * `npm start` as a test runs it: launched as `node scripts/start.ts` or through npm, its output kept, waited for
 * until it is up, and what it left found and ended after a failed test. Shared by the start, stop and Prometheus tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { freePort } from '../../scripts/dev-server';
import { alive, processesMentioning } from './processes';

export const root = path.resolve(import.meta.dirname, '../..');
/** What start.ts logs last once every child has exited. */
export const STOPPED = 'stopped: every process npm start ran has exited';
export const lastLine = (output: string): string | undefined => output.trim().split('\n').at(-1);

/**
 * `node scripts/start.ts` (what `npm start` execs), or the real `npm start` with its npm process on top. Always
 * the leader of a process group of its own, as a terminal runs a command: `process.kill(-pid, ...)` is Ctrl-C.
 */
export function launch(env: NodeJS.ProcessEnv, via: 'node' | 'npm'): { child: ChildProcess; output: () => string } {
  const options = { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'], detached: true };
  const child =
    via === 'npm'
      ? spawn('npm', ['start'], { ...options, env: { ...env, npm_config_update_notifier: 'false' } })
      : spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], { ...options, env });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return { child, output: () => out };
}

export async function start(env: NodeJS.ProcessEnv, via: 'node' | 'npm' = 'node'): Promise<{ child: ChildProcess; output: () => string }> {
  const run = launch(env, via);
  const exited = () => run.child.exitCode !== null || run.child.signalCode !== null;
  // A start that fails exits: said at once, with its error lines, rather than at the deadline.
  await waitFor(() => run.output().includes('live rebalancer is running') || exited(), 180_000, () => `npm start did not come up: ${run.output().slice(-2000)}`);
  if (!run.output().includes('live rebalancer is running')) throw new Error(`npm start exited with ${run.child.exitCode ?? run.child.signalCode}: ${errorsAndTail(run.output())}`);
  return run;
}

/** What a failed start said: its error lines (pino level 50 and up, where the cause is), then the end of its output. */
function errorsAndTail(out: string): string {
  const errors = out.split('\n').filter((l) => /"level":(5|6)\d/.test(l));
  return `${errors.join('\n')}\n...\n${out.slice(-2000)}`;
}

export async function waitFor(done: () => boolean, ms: number, failure: () => string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(failure());
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The exit code (null: killed by a signal), or 'running' if it has not exited within `ms`. */
export function exitWithin(child: ChildProcess, ms: number): Promise<number | null | 'running'> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('running'), ms);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

/**
 * After a SIGTERM: exit code 0, no child left at the moment it exits (one that the kernel or a closed pipe
 * ends later was not stopped by it), everything below it gone, and the stopped line last.
 */
export async function expectStoppedEverything(run: { child: ChildProcess; output: () => string }, started: number[], dataDir: string): Promise<void> {
  const code = await exitWithin(run.child, 60_000);
  expect(code, `exit code after SIGTERM (null: killed):\n${run.output().slice(-3000)}`).toBe(0);
  expect(processesMentioning(dataDir), 'processes left with its DATA_DIR when it exits').toEqual([]);
  await waitFor(() => started.every((pid) => !alive(pid)), 30_000, () => `still alive: ${started.filter(alive).join(', ')}`);
  expect(lastLine(run.output())).toContain(STOPPED);
}

/** Free ports, a temporary DATA_DIR and no TEMPORAL_ADDRESS or CLUSTER_URL: a run that starts everything itself. */
export async function ownEnv(): Promise<NodeJS.ProcessEnv & { DATA_DIR: string }> {
  const env: NodeJS.ProcessEnv & { DATA_DIR: string } = {
    ...process.env,
    TEMPORAL_PORT: String(await freePort()),
    TEMPORAL_UI_PORT: String(await freePort()),
    CLUSTER_PORT: String(await freePort()),
    ADMIN_PORT: String(await freePort()),
    WORKER_METRICS_PORT: String(await freePort()),
    DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'rebalancer-start-')),
    TEMPORAL_TASK_QUEUE: 'npm-start-test',
    LOG_LEVEL: 'info',
  };
  delete env.TEMPORAL_ADDRESS;
  delete env.CLUSTER_URL;
  return env;
}

/** After a failed test: end what the run left (the pids we recorded and anything naming its DATA_DIR). */
export function killLeftovers(pids: number[], dataDir: string): void {
  for (const pid of [...pids, ...processesMentioning(dataDir)]) {
    if (alive(pid)) process.kill(pid, 'SIGKILL');
  }
}

