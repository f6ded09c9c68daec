/**
 * /metrics scraped during a move on a reference cluster and the shared dev server (partitions q-540..q-559 only):
 * the move's series (kind and phase, bytes remaining), the sync budget of its target, the relay lag, the
 * counters' names and types per Prometheus conventions, and the planner decisions of a loop and of a drain whose
 * moves all start and end between two scrapes.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { call, startAdminFixture, type AdminFixture } from './admin-fixture';
import { rebalancerStatus } from '../../operations/rebalancer';
import { relayScope } from '../../operations/relay';
import { eventually } from './helpers';

let f: AdminFixture;

beforeAll(async () => {
  // About 3 MiB to copy at 256 KiB/s: the move is in flight for several scrapes.
  f = await startAdminFixture({ name: 'metrics', partitions: ['q-540', 'q-541'], config: { transferBytesPerSec: 256 * 1024 }, planner: { threshold: 1e6 } });
});
afterAll(async () => {
  await f?.close();
});

async function scrape(fixture = f): Promise<string> {
  const r = await fetch(`${fixture.admin.url}/metrics`);
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toMatch(/^text\/plain/);
  return r.text();
}

function value(text: string, series: RegExp): number | undefined {
  const line = text.split('\n').find((l) => series.test(l));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}

describe('metrics', () => {
  it("shows a move's series while it runs, and its target's sync budget", async () => {
    const topology = await f.cluster.client.topology();
    const p = topology.partitions.find((x) => x.id === 'q-540')!;
    const from = p.followers[0]!;
    const to = topology.nodes.find((n) => ![p.owner, ...p.followers].includes(n.id))!.id;
    const started = await call(f.admin.url, 'POST', '/api/moves', { body: { kind: 'follower-move', partition: 'q-540', from, to, reason: 'metrics test' } });
    expect(started.status).toBe(202);

    const remaining = new RegExp(`^rebalancer_move_remaining_bytes\\{partition="q-540",kind="follower-move",from="${from}",to="${to}"\\} `);
    const during = await eventually('the move catching up in /metrics', async () => {
      const text = await scrape();
      return (value(text, remaining) ?? 0) > 0 ? text : undefined;
    });
    expect(value(during, /^rebalancer_moves\{kind="follower-move",phase="catching_up"\} /)).toBe(1);
    expect(value(during, new RegExp(`^rebalancer_sync_budget_in_use_transfers\\{node="${to}"\\} `))).toBeGreaterThanOrEqual(1);
    expect(value(during, new RegExp(`^rebalancer_sync_budget_limit_transfers\\{node="${to}"\\} `))).toBe(4);
    expect(value(during, /^rebalancer_relay_lag_events /)).toBeGreaterThanOrEqual(0);
    expect(value(during, /^rebalancer_recovery_pending_partitions /)).toBe(0);
    expect(value(during, /^rebalancer_paused /)).toBe(0);
    expect(value(during, /^rebalancer_paused_seconds /)).toBe(0);
    expect(value(during, /^rebalancer_move_blocked_seconds\{partition="q-540",kind="follower-move"\} /), 'a series for each move in progress').toBeGreaterThanOrEqual(0);
    expect(value(during, /^rebalancer_loop_ticks_total /), 'the loop ticked when it started').toBeGreaterThanOrEqual(1);
    // Every invariant's breach counter is there at 0, so a first breach is an increase Prometheus sees.
    for (const invariant of [1, 2, 3, 4, 5]) expect(value(during, new RegExp(`^rebalancer_invariant_breaches_total\\{invariant="${invariant}"\\} `))).toBe(0);
    expect(value(during, /^rebalancer_score_spread /)).toBeGreaterThanOrEqual(0);

    await eventually('the move to end', async () => ((await call(f.admin.url, 'GET', '/api/moves/q-540')).body.running === false ? true : undefined), 120_000);
    const after = await scrape();
    expect(value(after, remaining)).toBeUndefined();
    expect(value(after, /^rebalancer_moves\{/)).toBeUndefined();
    expect(value(after, /^rebalancer_move_blocked_seconds\{/)).toBeUndefined();
  });

  it('counts refusals by code, with names per the conventions', async () => {
    const p = (await f.cluster.client.topology()).partitions.find((x) => x.id === 'q-541')!;
    const refused = await call(f.admin.url, 'POST', '/api/moves', { body: { kind: 'follower-move', partition: 'q-541', from: p.owner, to: p.followers[0], reason: 'metrics test' } });
    expect(refused.status).toBe(409);
    const text = await scrape();
    expect(value(text, new RegExp(`^rebalancer_refusals_total\\{code="${String(refused.body.error)}"\\} `))).toBe(1);
    for (const counter of ['rebalancer_refusals_total', 'rebalancer_planner_decisions_total', 'rebalancer_invariant_breaches_total']) {
      expect(text).toContain(`# TYPE ${counter} counter`);
    }
    for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      if (m[2] === 'counter') expect(m[1]).toMatch(/_total$/);
      else expect(m[1]).not.toMatch(/_total$/);
    }
  });
});

describe('moves in progress at size', () => {
  it('are listed without asking each workflow: the status and the nodes ask none, the moves page only the moves it shows', async () => {
    const topology = await f.cluster.client.topology();
    const p = topology.partitions.find((x) => x.id === 'q-541')!;
    const to = topology.nodes.find((n) => ![p.owner, ...p.followers].includes(n.id))!.id;
    const started = await call(f.admin.url, 'POST', '/api/moves', { body: { kind: 'follower-move', partition: 'q-541', from: p.followers[0], to, reason: 'listing test' } });
    expect(started.status).toBe(202);
    await eventually('q-541 copying to its target', async () => ((await f.cluster.client.syncBudget()).transfers.some((t) => t.partition === 'q-541' && t.node === to && t.bytesRemaining > 0) ? true : undefined));
    // At 200 moves in progress, a query to each took a second, which every page of the dashboard waited for.
    const asked = vi.spyOn(f.deps, 'statuses');
    try {
      const status = (await call(f.admin.url, 'GET', '/api/status')).body as { movesRunning: number };
      expect(status.movesRunning).toBe(1);
      // The copy arriving counts in its target's sync term, its bytes as the broker's transfer says.
      const nodes = (await call(f.admin.url, 'GET', '/api/nodes?sort=id')).body as { nodes: { node: string; sync: number }[] };
      expect(nodes.nodes.find((n) => n.node === to)!.sync).toBeGreaterThan(0);
      expect(asked).not.toHaveBeenCalled();
      const page = (await call(f.admin.url, 'GET', '/api/moves?limit=1&recent=0')).body as { total: number; running: { partition: string; phase: string; bytesTotal: number | null }[] };
      expect(page.total).toBe(1);
      expect(page.running).toEqual([expect.objectContaining({ partition: 'q-541', phase: expect.any(String) })]);
      expect(asked.mock.calls.map(([moves]) => moves.map((m) => m.partition))).toEqual([['q-541']]);
    } finally {
      asked.mockRestore();
    }
    await eventually('the move to end', async () => ((await call(f.admin.url, 'GET', '/api/moves/q-541')).body.running === false ? true : undefined), 120_000);
  });
});

describe('self-healing series', () => {
  it('count the under-replicated partitions and the repairs running; /api/status lists them', async () => {
    // A node holding copies goes down within the repair timeout: each of its partitions is a copy short (once the
    // recovery of what it owned activates, it is a down follower there too), and none is repaired yet.
    const topology = await f.cluster.client.topology();
    const node = topology.nodes.find((n) => topology.partitions.some((p) => [p.owner, ...p.followers].includes(n.id)))!.id;
    const held = topology.partitions.filter((p) => [p.owner, ...p.followers].includes(node)).map((p) => p.id).sort();
    await f.cluster.client.fault({ fault: 'crash-node', node });
    try {
      const text = await eventually(`${held.join(', ')} under-replicated in /metrics`, async () => {
        const t = await scrape();
        return value(t, /^rebalancer_under_replicated_partitions /) === held.length ? t : undefined;
      });
      expect(value(text, /^rebalancer_repairs_in_flight /)).toBe(0);
      const status = (await call(f.admin.url, 'GET', '/api/status')).body as { underReplicated: { partition: string }[]; repairsRunning: number };
      expect(status.repairsRunning).toBe(0);
      expect(status.underReplicated.map((u) => u.partition).sort()).toEqual(held);
      for (const u of status.underReplicated) expect(u).toMatchObject({ replicationFactor: 3, liveCopies: 2, lost: [], repair: null });
    } finally {
      await f.cluster.client.fault({ fault: 'restart-node', node });
    }
    await eventually('every partition whole again', async () => (value(await scrape(), /^rebalancer_under_replicated_partitions /) === 0 ? true : undefined));
  });
});

describe('planner decisions', () => {
  let g: AdminFixture;
  beforeAll(async () => {
    // The default threshold: a node joining empty is far below the mean and the loop fills it.
    g = await startAdminFixture({ name: 'metrics-loop', partitions: ['q-550', 'q-551', 'q-552'] });
  });
  afterAll(async () => {
    await g?.close();
  });

  /** Every reconfiguration of this cluster's partitions, from Temporal's visibility: all the loop's, none asked for. */
  async function reconfigurations(): Promise<{ total: number; running: number }> {
    let total = 0;
    let running = 0;
    for await (const w of g.client.workflow.list({ query: 'WorkflowId STARTS_WITH "reconfigure-q-55"' })) {
      total++;
      if (w.status.name === 'RUNNING') running++;
    }
    return { total, running };
  }

  it('counts every move the loop starts, also those that start and end between two scrapes', async () => {
    // Nothing scrapes until the loop has started and finished every move (the layout's and those for the node that joined).
    await g.cluster.client.joinNode('n6', 1, 'z1');
    const moved = await eventually(
      "the loop's moves onto n6 to end",
      async () => {
        const [r, status, loop] = await Promise.all([reconfigurations(), g.deps.rebalancer.status(), rebalancerStatus(g.client, relayScope(g.cluster.url, `metrics-loop-${process.pid}`))]);
        const started = Object.values(status.startedByKind).reduce((a, b) => a + b, 0);
        // The loop's last look started nothing more: the follower moves' end may still bring owner handoffs.
        const done = loop.lastPlan !== null && loop.lastPlan.started.length === 0 && loop.inFlight.length === 0;
        return r.total > 0 && r.running === 0 && started === r.total && done ? r : undefined;
      },
      90_000,
    );
    const after = await scrape(g);
    const counted = [...after.matchAll(/^rebalancer_planner_decisions_total\{kind="([^"]+)"\} (\S+)$/gm)];
    expect(counted.map((m) => m[1]).every((k) => k === 'follower-move' || k === 'owner-handoff')).toBe(true);
    expect(counted.reduce((sum, m) => sum + Number(m[2]), 0)).toBe(moved.total);
    expect(value(after, /^rebalancer_moves\{/)).toBeUndefined();
    expect(value(after, /^rebalancer_move_blocked_seconds\{/)).toBeUndefined();
    // Scraped again with nothing new, the counter stays.
    expect(decided(await scrape(g))).toBe(moved.total);
  });

  it("counts a drain's moves too: every reconfiguration of the cluster is one planner decision", async () => {
    // n3 holds a copy of every partition here and owns q-552: the drain hands that off and moves its copies to n7,
    // where a copy must stay in zone z3. The loop balances onto n7 too, so the drain waits on the loop's moves and
    // the sync budget they hold: the relay tells it when they end (its tick here is an hour).
    await g.cluster.client.joinNode('n7', 1, 'z3');
    await g.deps.drain('n3', { actor: 'metrics-test', reason: 'count the drain' });
    const ended = await eventually(
      'the drain to end with every move it started, and no move to start around a scrape',
      async () => {
        const [before, drains, topology] = await Promise.all([reconfigurations(), g.deps.drainDecisions(), g.cluster.client.topology()]);
        const drain = drains.find((d) => d.drain.startsWith('drain-n3@'));
        const byDrain = Object.values(drain?.startedByKind ?? {}).reduce((a, b) => a + b, 0);
        const held = topology.partitions.filter((p) => [p.owner, ...p.followers, ...p.learners].includes('n3')).length;
        if (byDrain === 0 || held > 0 || before.running > 0) return undefined;
        const text = await scrape(g);
        const after = await reconfigurations();
        return after.total === before.total && after.running === 0 ? { total: after.total, text } : undefined;
      },
      120_000,
    );
    expect(decided(ended.text)).toBe(ended.total);
  });
});

function decided(text: string): number {
  return [...text.matchAll(/^rebalancer_planner_decisions_total\{.*\} (\S+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}
