/**
 * Shared by the increase, replacement and returning-replica tests: faults fired at one write boundary, the
 * outcome of a reconfiguration however it ended, and fresh partitions under the file's own ids.
 */
import { CancelledFailure, WorkflowFailedError, ApplicationFailure, type WorkflowHandle } from '@temporalio/client';
import type { ClusterClient } from '../../cluster/client';
import type { Fault, GuardedWriteName, Partition } from '../../cluster/contract';
import type { MoveOutcome } from '../../workflows/definitions';
import { eventually } from './helpers';

/** Faults to fire just before or just after the next `write` on `partition`. */
export interface Armed {
  partition: string;
  write: GuardedWriteName;
  when: 'before' | 'after';
  faults: Fault[];
  fired: boolean;
}

/** The activities' broker client, firing the armed faults at their write boundary. */
export function armFault(real: ClusterClient, armed: { current: Armed | null }): Pick<ClusterClient, 'partition' | 'nodes' | 'write'> {
  return {
    partition: (id) => real.partition(id),
    nodes: () => real.nodes(),
    write: async (partition, write, request) => {
      const a = armed.current && !armed.current.fired && armed.current.partition === partition && armed.current.write === write ? armed.current : null;
      if (a?.when === 'before') {
        a.fired = true;
        for (const f of a.faults) await real.fault(f);
      }
      const reply = await real.write(partition, write, request);
      if (a?.when === 'after') {
        a.fired = true;
        for (const f of a.faults) await real.fault(f);
      }
      return reply;
    },
  };
}

/** The outcome of a workflow built on the step library: returned when completed, carried by the failure otherwise. */
export async function outcomeOf(handle: WorkflowHandle): Promise<MoveOutcome> {
  try {
    return (await handle.result()) as MoveOutcome;
  } catch (err) {
    const cause = err instanceof WorkflowFailedError ? err.cause : undefined;
    if (cause instanceof CancelledFailure || cause instanceof ApplicationFailure) {
      const outcome = cause.details?.[0] as MoveOutcome | undefined;
      if (outcome) return outcome;
    }
    throw err;
  }
}

/** Restarts a crashed node a moment after its fault fired (a restarted process with its disk), and returns the result. */
export async function healAfter<T>(broker: ClusterClient, a: Armed, node: string | null, result: Promise<T>): Promise<T> {
  let ended = false;
  const healer = (async () => {
    if (!node) return;
    await eventually('the fault to fire or the move to end', async () => (a.fired || ended ? true : undefined), 120_000);
    if (!a.fired) return;
    await new Promise((r) => setTimeout(r, 1_500));
    await broker.fault({ fault: 'restart-node', node });
  })();
  const out = await result.finally(() => (ended = true));
  await healer;
  return out;
}

/** A new partition under `id` (an earlier one of that id deleted first), once it is serving. */
export async function freshPartition(broker: ClusterClient, id: string, replicas: string[], kind: 'queue' | 'stream' = 'queue'): Promise<Partition> {
  await broker.deletePartition(id).catch(() => undefined);
  await broker.createPartition({ id, kind, replicas });
  return eventually(`${id} serving`, async () => {
    const p = (await broker.partition(id)).partition;
    return p.pendingRecovery === null ? p : undefined;
  });
}

/** Settled after faults: no pending recovery and every copy re-admitted. */
export function settled(broker: ClusterClient, id: string): Promise<Partition> {
  return eventually(`${id} settled`, async () => {
    const p = (await broker.partition(id)).partition;
    return p.pendingRecovery === null && p.history.every((h) => !h.suspended) ? p : undefined;
  });
}
