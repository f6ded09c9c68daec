/**
 * Start the reference cluster as its own process (`cluster/main.ts`) and wait for the JSON log line that
 * carries its URL. Used where the cluster must not share an event loop with the caller (benchmarks), where a
 * suite wants a real process, and where a test kills it and starts it again on the same data directory.
 * The cluster stops when its parent exits, however it exits (scripts/exit-with-parent.ts), and no signal to the
 * parent's process group reaches it.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface SpawnedCluster {
  url: string;
  dataDir: string;
  pid: number;
  /** Settles when the process exits, for a caller that must notice an unexpected exit. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then remove the data directory unless it was given or kept. */
  close(): Promise<void>;
  /** SIGKILL, as a crash: the data directory stays for a restart. */
  kill9(): Promise<void>;
}

export async function spawnCluster(
  flags: Record<string, string | number>,
  options: {
    startTimeoutMs?: number;
    keepData?: boolean;
    nodeArgs?: string[];
    port?: number;
    dataDir?: string;
    /** Every output chunk of the process, for a caller that shows its logs (npm start). */
    output?: (chunk: string) => void;
    /** Aborted while starting: the process is stopped and the start rejects. */
    signal?: AbortSignal;
  } = {},
): Promise<SpawnedCluster> {
  options.signal?.throwIfAborted();
  const dataDir = options.dataDir ?? mkdtempSync(path.join(tmpdir(), 'cluster-'));
  const keepData = options.keepData ?? options.dataDir !== undefined;
  const args = [
    ...(options.nodeArgs ?? []),
    '--import',
    'tsx',
    '--import',
    pathToFileURL(path.join(repoRoot, 'scripts/exit-with-parent.ts')).href,
    path.join(repoRoot, 'cluster/main.ts'),
    '--port',
    String(options.port ?? 0),
    '--data',
    dataDir,
  ];
  for (const [k, v] of Object.entries(flags)) args.push(`--${k}`, String(v));
  // stdin is the pipe exit-with-parent.ts watches: kept open and never written. In a session of its own, a
  // terminal's Ctrl-C reaches the parent only, which stops the cluster after whatever still talks to it.
  const child = spawn(process.execPath, args, { cwd: repoRoot, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const running = () => child.exitCode === null && child.signalCode === null;
  const stop = async (): Promise<void> => {
    if (running()) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
  };
  const stopStarting = (): void => void stop();
  options.signal?.addEventListener('abort', stopStarting, { once: true });
  let log = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`cluster did not report its url within ${options.startTimeoutMs ?? 60_000} ms:\n${log}`));
    }, options.startTimeoutMs ?? 60_000);
    const onData = (chunk: Buffer): void => {
      options.output?.(chunk.toString());
      log += chunk.toString();
      const m = /"url"\s*:\s*"(http:\/\/[^"]+)"/.exec(log);
      if (m?.[1] !== undefined) {
        clearTimeout(timer);
        resolve(m[1]);
      }
      // Keep only the tail so a chatty process does not grow this string forever.
      if (log.length > 100_000) log = log.slice(-10_000);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`cluster exited (${code ?? signal}) before reporting its url:\n${log}`));
    });
  }).finally(() => options.signal?.removeEventListener('abort', stopStarting));
  // Keep reading the pipes so the child never blocks on a full one.
  child.stdout.removeAllListeners('data');
  child.stderr.removeAllListeners('data');
  const forward = (chunk: Buffer): void => options.output?.(chunk.toString());
  child.stdout.on('data', forward);
  child.stderr.on('data', forward);
  return {
    url,
    dataDir,
    pid: child.pid ?? -1,
    exited,
    async kill9() {
      if (running()) child.kill('SIGKILL');
      await exited;
    },
    async close() {
      await stop();
      if (!keepData) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
