/**
 * The queries docs/operations/README.md's "In the Temporal UI" gives an operator, typed as they are there, through the client's
 * `workflow.list({ query })` (what the UI's search box sends): each finds a move held in covering_boundary (T
 * crashed with its disk right after the swap), and the "blocked for more than 10 minutes" query tells a move
 * blocked since before the cut-off from one blocked since after it, by the RebalancePhaseSince attribute.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFollowerMove, type MovesContext } from '../../operations/moves';
import { reconfigurationWorkflowId, statusQuery } from '../../rules/definitions';
import { PhaseKey, PhaseSinceKey } from '../../rules/search-attributes';
import { eventually, outcomeOf, pickMove, startSuite, type TestCluster } from './helpers';
import { armFault, type Armed } from './write-faults';

const PAGE = 'docs/operations/README.md';
const page = fs.readFileSync(path.resolve(import.meta.dirname, '../..', PAGE), 'utf8');

/** The query the operations page gives after `label` (a list item: label, colon, the query in backticks). */
function docsQuery(label: string): string {
  const line = page.split('\n').find((l) => l.startsWith(`- ${label}:`));
  const query = line && /`([^`]+)`/.exec(line)?.[1];
  if (!query) throw new Error(`${PAGE} has no query for "${label}"`);
  return query;
}

let cluster: TestCluster;
let client: Client;
let ctx: MovesContext;
let stop: (() => Promise<void>) | undefined;
let armed: Armed | null = null;
const taskQueue = `ui-queries-${process.pid}`;

beforeAll(async () => {
  ({ cluster, client, ctx, stop } = await startSuite(taskQueue, { shape: { nodes: 5, partitions: 2, streams: 0 }, wrap: (real) => armFault(real, () => armed) }));
});

afterAll(async () => {
  await stop?.();
});

/** Whether `query` finds the workflow, once visibility (updated after each change, not with it) agrees. */
async function finds(query: string, workflowId: string, expected: boolean): Promise<void> {
  await eventually(`${expected ? '' : 'no '}${workflowId} in ${query}`, async () => {
    const ids = [];
    for await (const wf of client.workflow.list({ query })) ids.push(wf.workflowId);
    return ids.includes(workflowId) === expected ? true : undefined;
  }, 30_000);
}

describe("the operations page's Temporal UI queries", () => {
  it('find a move onto a node, waiting on a boundary, and blocked longer than the cut-off', async () => {
    const partition = 'q-0';
    const workflowId = reconfigurationWorkflowId(partition);
    const { from, to } = await pickMove(cluster.client, partition);
    // T crashes right after the swap and loses its disk: below B, the move waits in covering_boundary until T is back.
    let swappedAt = Infinity;
    const hook = async () => void (swappedAt = Date.now());
    armed = { partition, write: 'swap', when: 'after', faults: [{ fault: 'crash-node', node: to }, { fault: 'lose-disk', node: to }], hook, fired: false };
    const handle = await startFollowerMove(ctx, { partition, from, to, origin: 'operator', timing: { pollMs: 500 } });
    await eventually('the move to wait in covering_boundary', async () => ((await handle.query(statusQuery)).phase === 'covering_boundary' ? true : undefined));
    expect(armed.fired).toBe(true);
    const since = await eventually('visibility to show the phase', async () => {
      const attrs = (await handle.describe()).typedSearchAttributes;
      return attrs.get(PhaseKey) === 'covering_boundary' ? attrs.get(PhaseSinceKey) : undefined;
    });
    // The time covering_boundary began (after the swap's reply), not the time the move started.
    expect(since!.getTime()).toBeGreaterThanOrEqual(swappedAt - 100);

    expect(docsQuery('every move onto node n4')).toContain('"n4"');
    const ontoNode = docsQuery('every move onto node n4').replaceAll('"n4"', `"${to}"`);
    await finds(ontoNode, workflowId, true);
    await finds(ontoNode.replaceAll(`"${to}"`, `"${from}"`), workflowId, false);

    await finds(docsQuery('moves waiting on a boundary'), workflowId, true);

    // The page's cut-off is "now minus 10 minutes"; here the cut-off sits just after and just before the phase began.
    const blocked = docsQuery('moves blocked for more than 10 minutes');
    const cutOff = /"(\d{4}-\d\d-\d\dT[\d:.]+Z)"/.exec(blocked)?.[1];
    expect(cutOff, 'the query compares RebalancePhaseSince with a UTC time').toBeDefined();
    const at = (t: Date) => blocked.replace(cutOff!, t.toISOString());
    await finds(at(new Date(since!.getTime() + 1_000)), workflowId, true);
    // Blocked for less time than this cut-off asks.
    await finds(at(new Date(since!.getTime() - 1_000)), workflowId, false);

    await cluster.client.fault({ fault: 'restart-node', node: to });
    expect(await outcomeOf(handle)).toMatchObject({ status: 'completed' });
    // An ended move neither waits nor is blocked.
    await finds(docsQuery('moves waiting on a boundary'), workflowId, false);
    await finds(at(new Date()), workflowId, false);
    expect((await cluster.client.invariants()).breaches).toEqual([]);
  });
});
