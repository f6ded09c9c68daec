/** Shared set-up for integration tests: a worker of this project on the real dev server, a client, a logger. */
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { inject } from 'vitest';
import pino from 'pino';
import { createRebalancerWorker, type RebalancerWorker } from '../../worker/worker';
import { installRuntimeLogger } from '../../worker/logger';

export const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'warn' });
installRuntimeLogger(logger);

export function temporalAddress(): string {
  return inject('temporalAddress');
}

export async function connectClient(): Promise<Client> {
  const connection = await Connection.connect({ address: temporalAddress() });
  return new Client({ connection });
}

/** A worker on its own task queue, so test files running side by side do not take each other's tasks. */
export async function startWorker(clusterUrl: string, taskQueue: string): Promise<{ w: RebalancerWorker; running: Promise<void>; dataDir: string }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rebalancer-worker-'));
  const w = await createRebalancerWorker({
    temporal: { address: temporalAddress(), namespace: 'default', taskQueue },
    clusterUrl,
    dataDir,
    logger,
    relay: { pollWaitMs: 500, progressIntervalMs: 500, batchMs: 50 },
  });
  const running = w.run();
  return { w, running, dataDir };
}
