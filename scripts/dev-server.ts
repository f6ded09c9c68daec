/** Starts a Temporal dev server from the CLI binary and waits until it answers. */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { SearchAttributeType } from '@temporalio/common';
import proto from '@temporalio/proto';
import { SEARCH_ATTRIBUTES } from '../rules/search-attributes';
import { onPath } from './temporal-cli';

export interface DevServer {
  address: string;
  uiUrl: string | null;
  process: ChildProcess;
  stop(): Promise<void>;
}

export interface DevServerOptions {
  executable: string;
  /** null: state in memory only (benchmarks of orchestration cost without the dev server's disk). */
  dbFile: string | null;
  port?: number;
  /** null: headless (no Web UI). */
  uiPort?: number | null;
  /** Registered at start, each with the project's search attributes; `default` when not given. */
  namespaces?: string[];
  log?: (line: string) => void;
  /** Aborted while starting: the child is stopped and the start rejects. */
  signal?: AbortSignal;
}

const { IndexedValueType } = proto.temporal.api.enums.v1;
const INDEXED_TYPE: Record<(typeof SEARCH_ATTRIBUTES)[number]['type'], proto.temporal.api.enums.v1.IndexedValueType> = {
  [SearchAttributeType.KEYWORD]: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  [SearchAttributeType.DATETIME]: IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
};

/**
 * Ports handed out below the kernel's ephemeral range (32768-60999 on Linux), from which outgoing connections take
 * their local ports: a port picked there (listen on 0) and released until its server starts can be taken by a client
 * socket meanwhile, as a test saw the reference cluster refused with EADDRINUSE while Temporal's dev server came up.
 * Each process walks the range from a random start, so two processes seldom try the same port, and one never twice.
 */
const PORTS = { from: 10_000, to: 32_000 };
let nextPort = PORTS.from + Math.floor(Math.random() * (PORTS.to - PORTS.from));

/** A port free at 127.0.0.1 now, outside the ephemeral range (or, were none free there, any the kernel gives). */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const port = nextPort;
    nextPort = nextPort + 1 >= PORTS.to ? PORTS.from : nextPort + 1;
    if (await portFree(port)) return port;
  }
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Whether `port` can be listened on at 127.0.0.1 now (the address every local server here uses). */
export async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' || err.code === 'EACCES' ? resolve(false) : reject(err)));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
export async function stopChild(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timeout = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timeout);
}

export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  options.signal?.throwIfAborted();
  const port = options.port ?? (await freePort());
  const uiPort = options.uiPort === undefined ? await freePort() : options.uiPort;
  if (options.dbFile) fs.mkdirSync(path.dirname(options.dbFile), { recursive: true });
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    // The file in WAL mode, synced at checkpoints (synchronous=normal): a commit appends to the log, where SQLite's
    // default (a rollback journal, synchronous=full) syncs the disk several times a commit, which made the file the
    // dev server's bottleneck. A commit still survives the server's crash or kill; an OS crash may lose the last ones.
    ...(options.dbFile ? ['--db-filename', options.dbFile, '--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal'] : []),
    ...(options.namespaces ?? ['default']).flatMap((namespace) => ['--namespace', namespace]),
    '--log-level',
    'error',
    ...(uiPort === null ? ['--headless'] : ['--ui-port', String(uiPort)]),
  ];
  // Where util-linux's setpriv exists (Linux), the kernel sends the server SIGTERM when this process dies,
  // even by SIGKILL, so a killed parent leaves no dev server holding its ports. In a session of its own, a
  // terminal's Ctrl-C reaches the parent only, which stops the server after whatever still talks to it.
  const setpriv = onPath('setpriv');
  const spawnOptions = { stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'], detached: true };
  const child = setpriv
    ? spawn(setpriv, ['--pdeathsig', 'TERM', '--', options.executable, ...args], spawnOptions)
    : spawn(options.executable, args, spawnOptions);
  let output = '';
  // The CLI prints "Server:  localhost:<port>" once its server has started; it exits at once when it cannot bind.
  const banner = new RegExp(`^Server:\\s+\\S+:${port}\\s*$`, 'm');
  let started = false;
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString()).slice(-4000);
    started ||= banner.test(output);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const address = `127.0.0.1:${port}`;
  const stopStarting = (): void => void stopChild(child, 10_000);
  options.signal?.addEventListener('abort', stopStarting, { once: true });

  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      options.signal?.throwIfAborted();
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`the Temporal dev server exited with ${child.exitCode ?? child.signalCode} at start: ${output.trim()}`);
      }
      // Our child announced it started and is still alive after the probe: an answer alone may come from
      // another server on the port.
      if (started && (await answers(address)) && child.exitCode === null && child.signalCode === null) break;
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`the Temporal dev server did not answer on ${address} within 60s: ${output.trim()}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  } catch (err) {
    await stopChild(child, 10_000);
    throw err;
  } finally {
    options.signal?.removeEventListener('abort', stopStarting);
  }
  try {
    await registerSearchAttributes(address, options.namespaces ?? ['default']);
  } catch (err) {
    await stopChild(child, 10_000);
    throw err;
  }
  options.log?.(`Temporal dev server ready on ${address}`);
  return {
    address,
    uiUrl: uiPort === null ? null : `http://127.0.0.1:${uiPort}`,
    process: child,
    stop: () => stopChild(child, 10_000),
  };
}

/**
 * The project's search attributes, each with its type, in every namespace that lacks one. Through the API rather
 * than the CLI's --search-attribute, which registers them only when it creates the database: a `.data` from an
 * earlier version would miss the newer ones, and every upsert of one fails the workflow task.
 */
async function registerSearchAttributes(address: string, namespaces: string[]): Promise<void> {
  const connection = await Connection.connect({ address });
  try {
    for (const namespace of namespaces) {
      const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
      const missing = SEARCH_ATTRIBUTES.filter((key) => !(key.name in (customAttributes ?? {})));
      if (missing.length === 0) continue;
      await connection.operatorService.addSearchAttributes({
        namespace,
        searchAttributes: Object.fromEntries(missing.map((key) => [key.name, INDEXED_TYPE[key.type]])),
      });
    }
  } finally {
    await connection.close();
  }
}

async function answers(address: string): Promise<boolean> {
  try {
    const connection = await Connection.connect({ address, connectTimeout: 1000 });
    try {
      await connection.workflowService.getSystemInfo({});
    } finally {
      await connection.close();
    }
    return true;
  } catch {
    return false;
  }
}
