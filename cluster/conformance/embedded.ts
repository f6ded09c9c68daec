/**
 * An in-process reference cluster of the shape the conformance suite expects: stepped clock, temporary
 * data directory. It also offers the one control the contract lacks (marking a node draining).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startCluster } from '../server';
import { SUITE_SHAPE } from './cases';
import type { Extras } from './harness';

export interface Embedded {
  url: string;
  extras: Extras;
  close(): Promise<void>;
}

export async function startEmbedded(shape: typeof SUITE_SHAPE = SUITE_SHAPE, seed = 1): Promise<Embedded> {
  const data = mkdtempSync(path.join(tmpdir(), 'conformance-'));
  const cluster = await startCluster({
    port: 0,
    data,
    nodes: shape.nodes,
    partitions: shape.queuePartitions,
    streams: shape.streams,
    clock: 'stepped',
    config: { seed, replicationFactor: shape.replicationFactor },
  });
  return {
    url: cluster.url,
    extras: {
      async setDraining(node, draining) {
        cluster.sim.setDraining(node, draining);
      },
    },
    async close() {
      await cluster.close();
      rmSync(data, { recursive: true, force: true });
    },
  };
}
