import type { GuardedWriteName, GuardedWriteRequest, WriteReply } from '../../cluster/contract';
import { ClusterSim } from '../../cluster/sim/sim';
import type { SimConfig } from '../../cluster/sim/types';

/** Small, fast settings: a learner catches up in well under a simulated second. */
export const fastConfig: Partial<SimConfig> = {
  initialMessages: 1_000,
  retainMessages: 500,
  messageBytes: 100,
  transferBytesPerSec: 1_000_000,
  publishRate: 10,
  catchUpSlack: 20,
  recoveryDelayMs: 500,
};

/** q-0: n1 owner, n2 n3 followers; q-1: n2, n3 n4; q-2: n3, n4 n5 ...; s-0 is a stream. */
export function makeSim(config: Partial<SimConfig> = {}, nodes = 6, partitions = 3): ClusterSim {
  return ClusterSim.create({ nodes, partitions, streams: 1, config: { ...fastConfig, ...config } });
}

let keys = 0;
type Body<N extends GuardedWriteName> = Omit<GuardedWriteRequest<N>, 'expectedGeneration' | 'idempotencyKey'>;

/** A guarded write at the partition's current generation with a fresh key. */
export function write<N extends GuardedWriteName>(sim: ClusterSim, partition: string, name: N, body: Body<N>): WriteReply {
  const req = { expectedGeneration: sim.partition(partition).generation, idempotencyKey: `k${keys++}`, ...body };
  return sim.write(partition, name, req as GuardedWriteRequest<N>);
}

/** Advances until the node is admitted to the partition's history (or fails after `ms`). */
export function untilAdmitted(sim: ClusterSim, partition: string, node: string, ms = 20_000): void {
  for (let t = 0; t < ms; t += 100) {
    const h = sim.partition(partition).history.find((e) => e.node === node);
    if (h && !h.suspended) return;
    sim.advance(100);
  }
  throw new Error(`${node} was not admitted to ${partition} within ${ms} ms`);
}

export function record(sim: ClusterSim, partition: string): string {
  return JSON.stringify(sim.partitionRecord(sim.partition(partition)));
}
