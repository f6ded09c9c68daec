/**
 * The series the alerts read, from the admin service's scrape on sources it is handed: how long each move in
 * progress has been blocked (counted from the first scrape that saw it blocked, back to 0 once it is not),
 * how long rebalancing has been paused, the loop's ticks as a counter that never goes down.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AdminDeps, RebalancerView } from '../../admin/deps';
import { createMetrics } from '../../admin/metrics';
import type { MoveStatus } from '../../rules/definitions';

const T0 = Date.parse('2026-01-01T00:00:00Z');

function move(blockingReason: string | null): MoveStatus {
  return {
    kind: 'follower-move',
    partition: 'q-1',
    from: 'n1',
    to: 'n4',
    origin: 'planner',
    phase: 'catching_up',
    bytesRemaining: 1000,
    boundary: null,
    targetDurable: null,
    blockingReason,
    epoch: 1,
    generation: 1,
    retries: 0,
    outcome: null,
  };
}

function sources(state: () => RebalancerView): AdminDeps {
  return {
    topology: async () => ({ nodes: [], partitions: [] }),
    syncBudget: async () => ({ nodes: [], transfers: [] }),
    invariants: async () => ({ breaches: [] }),
    relayLag: async () => 0,
    rebalancer: { status: async () => state() },
    recentMoves: async () => [],
    drainDecisions: async () => [],
    scores: () => ({ spread: 0, mean: 0 }),
    underReplicated: () => [],
    topologyReads: () => ({ fullReads: 1, pageReads: 0, changesReads: 0, fallbacks: 0, drifts: 0 }),
  } as unknown as AdminDeps;
}

function value(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}

const running: RebalancerView = { state: 'running', pausedBy: null, reason: null, since: null, waitingFor: 'the next tick', startedByKind: {}, ticks: 3, mode: 'auto', pendingPlan: null, approved: null, pinned: [], excluded: [] };

describe('the series the alerts read', () => {
  beforeEach(() => vi.useFakeTimers({ now: T0, toFake: ['Date'] }));
  afterEach(() => vi.useRealTimers());

  it("counts a move's blocked time from the first scrape that saw it blocked, and drops it once it is not", async () => {
    const metrics = createMetrics();
    const deps = sources(() => running);
    const series = 'rebalancer_move_blocked_seconds{partition="q-1",kind="follower-move"}';
    expect(value(await metrics.scrape(deps, async () => [move(null)]), series)).toBe(0);
    vi.setSystemTime(T0 + 10_000);
    expect(value(await metrics.scrape(deps, async () => [move('the sync budget of n4 is full')]), series)).toBe(0);
    vi.setSystemTime(T0 + 70_000);
    expect(value(await metrics.scrape(deps, async () => [move('the sync budget of n4 is full')]), series)).toBe(60);
    vi.setSystemTime(T0 + 80_000);
    expect(value(await metrics.scrape(deps, async () => [move(null)]), series)).toBe(0);
    vi.setSystemTime(T0 + 90_000);
    expect(value(await metrics.scrape(deps, async () => [move('stalled')]), series), 'blocked again: counted anew').toBe(0);
    expect(value(await metrics.scrape(deps, async () => []), series), 'ended: no series').toBeUndefined();
  });

  it('says how long rebalancing has been paused, 0 while it runs', async () => {
    const metrics = createMetrics();
    let state = running;
    const deps = sources(() => state);
    expect(value(await metrics.scrape(deps, async () => []), 'rebalancer_paused_seconds')).toBe(0);
    state = { ...running, state: 'paused', pausedBy: 'ann', reason: 'maintenance', since: new Date(T0 - 3_600_000).toISOString() };
    expect(value(await metrics.scrape(deps, async () => []), 'rebalancer_paused_seconds')).toBe(3600);
  });

  it("follows the loop's ticks, and a new loop's fewer ticks never take the counter down", async () => {
    const metrics = createMetrics();
    let ticks = 3;
    const deps = sources(() => ({ ...running, ticks }));
    expect(value(await metrics.scrape(deps, async () => []), 'rebalancer_loop_ticks_total')).toBe(3);
    ticks = 5;
    expect(value(await metrics.scrape(deps, async () => []), 'rebalancer_loop_ticks_total')).toBe(5);
    ticks = 1;
    expect(value(await metrics.scrape(deps, async () => []), 'rebalancer_loop_ticks_total')).toBe(5);
    ticks = 2;
    expect(value(await metrics.scrape(deps, async () => []), 'rebalancer_loop_ticks_total')).toBe(6);
  });
});

describe('the series count at size (issue 20)', () => {
  it('at 1,000 nodes, 100,000 partitions and 1,000 moves: two series per node, two per move in progress, none per partition at rest', async () => {
    const nodes = Array.from({ length: 1000 }, (_, i) => `n${i}`);
    const partitions = Array.from({ length: 100_000 }, (_, i) => ({ id: `q-${i}`, pendingRecovery: null }));
    const deps = {
      ...sources(() => running),
      topology: async () => ({ nodes: nodes.map((id) => ({ id })), partitions }),
      syncBudget: async () => ({ nodes: nodes.map((node) => ({ node, inUse: 1, limit: 2 })), transfers: [] }),
    } as unknown as AdminDeps;
    const moves = Array.from({ length: 1000 }, (_, i) => ({ ...move(i % 2 === 0 ? 'stalled' : null), partition: `q-${i}` }));
    const text = await createMetrics().scrape(deps, async () => moves);
    const series = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
    const named = (prefix: string) => series.filter((l) => l.startsWith(prefix)).length;
    expect(named('rebalancer_sync_budget_')).toBe(2 * nodes.length);
    expect(named('rebalancer_move_remaining_bytes{') + named('rebalancer_move_blocked_seconds{')).toBe(2 * moves.length);
    // Everything else is a fixed set: kinds, phases, invariants, codes.
    const fixed = series.length - 2 * nodes.length - 2 * moves.length;
    expect(fixed).toBeLessThan(40);
    // A partition at rest has no series: only those with a move in progress are named.
    expect(series.some((l) => l.includes('partition="q-1000"'))).toBe(false);
  });
});
