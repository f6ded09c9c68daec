/**
 * Faults at a write boundary, shared by the fault suites of every operation: the activities' broker client fires
 * the armed faults (or a hook) just before or just after one guarded write, and a crashed node comes back a
 * moment later as a restarted process with its disk.
 */
import type { ClusterClient } from '../../cluster/client';
import type { Fault, GuardedWriteName } from '../../cluster/contract';
import { eventually } from './helpers';

/** Faults to fire (and a hook to run) just before or just after the next `write` on `partition`. */
export interface Armed {
  partition: string;
  write: GuardedWriteName;
  when: 'before' | 'after';
  faults: Fault[];
  hook?: () => Promise<void>;
  fired: boolean;
  /** Whether the broker accepted the write the faults fired at (a passing refusal, say no sync budget, is retried after them). */
  accepted?: boolean;
}

/**
 * The activities' broker client, firing what `armed(partition, write)` holds at the write boundary of a write on
 * that partition (a suite arming several writes of one partition picks by `write`).
 */
export function armFault(real: ClusterClient, armed: (partition: string, write: GuardedWriteName) => Armed | null): Pick<ClusterClient, 'partition' | 'nodes' | 'write'> {
  const fire = async (a: Armed) => {
    a.fired = true;
    for (const f of a.faults) await real.fault(f);
    await a.hook?.();
  };
  return {
    partition: (id) => real.partition(id),
    nodes: () => real.nodes(),
    write: async (partition, write, request) => {
      const current = armed(partition, write);
      const a = current && !current.fired && current.partition === partition && current.write === write ? current : null;
      if (a?.when === 'before') await fire(a);
      const reply = await real.write(partition, write, request);
      if (a) a.accepted = reply.ok;
      if (a?.when === 'after') await fire(a);
      return reply;
    },
  };
}

/** Restarts a crashed node a moment after its fault fired (a restarted process with its disk), and returns the result. */
export async function healAfter<T>(broker: ClusterClient, a: Armed, node: string | null, result: Promise<T>): Promise<T> {
  let ended = false;
  const healer = (async () => {
    if (!node) return;
    await eventually('the fault to fire or the operation to end', async () => (a.fired || ended ? true : undefined), 120_000);
    if (!a.fired) return;
    await new Promise((r) => setTimeout(r, 1_500));
    await broker.fault({ fault: 'restart-node', node });
  })();
  const out = await result.finally(() => (ended = true));
  await healer;
  return out;
}
