/** The worker as a child process for process-fault tests, killable with SIGKILL (the cluster: cluster/spawn.ts). */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';

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

export function spawnWorker(env: { TEMPORAL_ADDRESS: string; TEMPORAL_TASK_QUEUE: string; CLUSTER_URL: string; DATA_DIR: string }): Promise<Child> {
  return spawnTs('worker/main.ts', [], { ...env, LOG_LEVEL: 'info' }, /worker ready/);
}
