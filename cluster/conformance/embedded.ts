/**
 * An in-process reference cluster for the conformance suite: a temporary data directory, a stepped clock
 * unless asked for a wall one, and by default nothing in it (the suite creates what it works on). Nodes and
 * partitions asked for here exist before the suite runs, as another user's would.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startCluster, type RunningCluster } from '../server';
import type { SimConfig } from '../sim/types';

export interface EmbeddedOptions {
  clock?: 'wall' | 'stepped';
  nodes?: number;
  partitions?: number;
  streams?: number;
  config?: Partial<SimConfig>;
}

export interface Embedded {
  url: string;
  cluster: RunningCluster;
  close(): Promise<void>;
}

export async function startEmbedded(options: EmbeddedOptions = {}): Promise<Embedded> {
  const data = mkdtempSync(path.join(tmpdir(), 'conformance-'));
  const cluster = await startCluster({
    port: 0,
    data,
    nodes: options.nodes ?? 0,
    partitions: options.partitions ?? 0,
    streams: options.streams ?? 0,
    clock: options.clock ?? 'stepped',
    config: { seed: 1, ...options.config },
  });
  return {
    url: cluster.url,
    cluster,
    async close() {
      await cluster.close();
      rmSync(data, { recursive: true, force: true });
    },
  };
}
