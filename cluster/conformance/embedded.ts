/**
 * A reference cluster of the shape the conformance suite expects, on a stepped clock with a temporary
 * data directory.
 */
import { SUITE_SHAPE } from './cases';
import { spawnCluster } from './spawn';

export interface Embedded {
  url: string;
  close(): Promise<void>;
}

export async function startEmbedded(shape: typeof SUITE_SHAPE = SUITE_SHAPE, seed = 1): Promise<Embedded> {
  return spawnCluster({
    nodes: shape.nodes,
    partitions: shape.queuePartitions,
    streams: shape.streams,
    seed,
    clock: 'stepped',
  });
}
