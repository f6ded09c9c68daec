/**
 * An in-process reference cluster of the shape the conformance suite expects: stepped clock, temporary
 * data directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startCluster } from '../server';
import { SUITE_SHAPE } from './cases';

export interface Embedded {
  url: string;
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
    async close() {
      await cluster.close();
      rmSync(data, { recursive: true, force: true });
    },
  };
}
