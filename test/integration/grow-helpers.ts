/**
 * Shared by the increase, replacement and returning-replica tests: faults fired at one write boundary, a crashed
 * node brought back, fresh partitions under the file's own ids.
 */
import type { Client } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { defaultPayloadConverter } from '@temporalio/common';
import type { ClusterClient } from '../../cluster/client';
import type { Partition } from '../../cluster/contract';
import { MoveRefused, type MovesContext } from '../../operations/moves';
import type { SimConfig } from '../../cluster/sim/types';
import { reconfigurationWorkflowId, statusQuery, type MoveStatus } from '../../rules/definitions';
import { eventually, startSuite, type TestCluster } from './helpers';
import { armFault, type Armed } from './write-faults';

export { healAfter, type Armed } from './write-faults';

/** The relay a test file's worker runs: its events reach a workflow of a partition id only once it passed them. */
export interface Relay {
  client: Client;
  workflowId: string;
}

async function relayCursor(relay: Relay): Promise<number> {
  const description = await relay.client.workflow.getHandle(relay.workflowId).describe();
  const details = description.raw.pendingActivities?.[0]?.heartbeatDetails?.payloads?.[0];
  return details ? defaultPayloadConverter.fromPayload<number>(details) : -1;
}

async function feedEnd(broker: ClusterClient): Promise<number> {
  let after = 0;
  for (;;) {
    const page = await broker.events(after, { limit: 10_000 });
    if (page.events.length === 0) return after;
    after = page.cursor;
  }
}

/**
 * A new partition under `id`, once it is serving. An earlier partition of that id is deleted first, and the
 * relay must have delivered its events before a new workflow of the same id starts: delivered later, they would
 * tell the new workflow of generations and recoveries the new partition never had.
 */
export async function freshPartition(broker: ClusterClient, relay: Relay, id: string, replicas: string[], kind: 'queue' | 'stream' = 'queue'): Promise<Partition> {
  const existed = await broker.deletePartition(id).then(() => true, () => false);
  if (existed) {
    const end = await feedEnd(broker);
    await eventually(`the relay past seq ${end}`, async () => ((await relayCursor(relay)) >= end ? true : undefined));
  }
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

/** What a test file of these operations works with, filled in by the hooks `useSuite` registers. */
export interface Suite {
  cluster: TestCluster;
  client: Client;
  ctx: MovesContext;
  relay: Relay;
  /** Faults the file's worker fires at a write boundary. */
  armed: { current: Armed | null };
}

/**
 * An eight-node reference cluster without partitions and a worker on the file's own task queue whose broker
 * client fires the armed faults; every test ends with zero invariant breaches.
 */
export function useSuite(taskQueue: string, config: Partial<SimConfig> = {}): Suite {
  const suite = { armed: { current: null } } as Suite;
  let stop: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const started = await startSuite(taskQueue, { config, shape: { nodes: 8, partitions: 0, streams: 0 }, wrap: (real) => armFault(real, () => suite.armed.current) });
    Object.assign(suite, { cluster: started.cluster, client: started.client, ctx: started.ctx, relay: { client: started.client, workflowId: started.relayWorkflowId } });
    stop = started.stop;
  });
  afterAll(async () => {
    await stop?.();
  });
  afterEach(async () => {
    expect((await suite.cluster.client.invariants()).breaches).toEqual([]);
  });
  return suite;
}

/** The running reconfiguration of `id`, once it is in one of `phases`. */
export function untilPhase(client: Client, id: string, phases: MoveStatus['phase'][]): Promise<MoveStatus> {
  return eventually(`${id} in ${phases.join('/')}`, async () => {
    const s = await client.workflow.getHandle(reconfigurationWorkflowId(id)).query(statusQuery);
    return phases.includes(s.phase) ? s : undefined;
  });
}

/** The refusal a start ended in (it must be one). */
export async function refusal(start: Promise<unknown>): Promise<{ code: string; message: string }> {
  const err = await start.then(() => new Error('started'), (e: unknown) => e);
  if (!(err instanceof MoveRefused)) throw err;
  return { code: err.code, message: err.message };
}
