/** Starts a Temporal dev server from the CLI binary and waits until it answers. */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../workflows/search-attributes';

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
  namespace?: string;
  log?: (line: string) => void;
}

export async function freePort(): Promise<number> {
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

export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
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
    ...(options.dbFile ? ['--db-filename', options.dbFile] : []),
    '--namespace',
    options.namespace ?? 'default',
    '--log-level',
    'error',
    ...SEARCH_ATTRIBUTES.flatMap((key) => ['--search-attribute', `${key.name}=Keyword`]),
    ...(uiPort === null ? ['--headless'] : ['--ui-port', String(uiPort)]),
  ];
  const child = spawn(options.executable, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const address = `127.0.0.1:${port}`;

  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) {
      throw new Error(`the Temporal dev server exited with ${child.exitCode} at start: ${output.trim()}`);
    }
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1000 });
      await connection.workflowService.getSystemInfo({});
      await connection.close();
      break;
    } catch (err) {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`the Temporal dev server did not answer on ${address} within 60s: ${(err as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  options.log?.(`Temporal dev server ready on ${address}`);
  return {
    address,
    uiUrl: uiPort === null ? null : `http://127.0.0.1:${uiPort}`,
    process: child,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const timeout = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timeout);
    },
  };
}
