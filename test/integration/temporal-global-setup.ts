/**
 * One real Temporal dev server for all integration tests: started once from the project's CLI binary on a
 * free port with its own temporary database and a namespace per test file, or TEMPORAL_ADDRESS when that names a server already.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startDevServer, type DevServer } from '../../scripts/dev-server';
import { ensureTemporalCli } from '../../scripts/temporal-cli';
import { allTestNamespaces } from './namespaces';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    /** Whether each test file has its own namespace (not on a server named by TEMPORAL_ADDRESS). */
    namespacePerFile: boolean;
  }
}

let server: DevServer | undefined;
let dir: string | undefined;

export async function setup(project: TestProject): Promise<void> {
  if (process.env.TEMPORAL_ADDRESS) {
    project.provide('temporalAddress', process.env.TEMPORAL_ADDRESS);
    project.provide('namespacePerFile', false);
    return;
  }
  const executable = await ensureTemporalCli((line) => console.log(line));
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rebalancer-temporal-'));
  server = await startDevServer({ executable, dbFile: path.join(dir, 'temporal.db'), uiPort: null, namespaces: ['default', ...allTestNamespaces()] });
  project.provide('temporalAddress', server.address);
  project.provide('namespacePerFile', true);
}

export async function teardown(): Promise<void> {
  await server?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
}
