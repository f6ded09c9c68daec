/**
 * How a tick learns which tracked moves ended without asking each (operations/running.ts): a whole list of the runs in
 * progress now and then, a look at the closes at each tick, and a describe of each tracked move neither vouches for.
 * At 1,000 moves in flight a describe of each took 3.5 s of every tick, a whole list 1.2-1.7 s. Visibility here lists
 * each run's start and close from their own moments on; the queries' `ExecutionStatus` and `CloseTime >` are read.
 */
import type { Client } from '@temporalio/client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { endsOf } from '../../activities/rebalancer';
import { FULL_LIST_EVERY_MS, RunningMoves } from '../../operations/running';
import type { TrackedMove } from '../../rules/definitions';

interface Run {
  runId: string;
  startedAt: number;
  closedAt?: number;
  /** When visibility lists its close. */
  closeListedAt?: number;
  firstRunId?: string;
}

const move = (runId: string, startedAt: number): TrackedMove => ({
  partition: `q-${runId}`,
  op: 'follower_move',
  from: 'n1',
  to: 'n2',
  workflowId: `reconfigure-q-${runId}`,
  runId,
  startedAt,
  bytes: 0,
  reason: 'test',
});

function visibility(runs: Run[]) {
  const lists = { running: 0, closes: 0 };
  const closeListed = (r: Run) => r.closedAt !== undefined && (r.closeListedAt ?? r.closedAt) <= Date.now();
  const client = {
    workflow: {
      list: ({ query }: { query: string }) => {
        let rows: Run[];
        if (query.includes('ExecutionStatus = "Running"')) {
          lists.running++;
          rows = runs.filter((r) => r.startedAt <= Date.now() && !closeListed(r));
        } else {
          expect(query).toContain('ExecutionStatus != "Running"');
          lists.closes++;
          const since = Date.parse(/CloseTime > "([^"]+)"/.exec(query)![1]!);
          rows = runs.filter((r) => closeListed(r) && r.closedAt! > since);
        }
        return (async function* () {
          for (const r of rows) yield { runId: r.runId, closeTime: r.closedAt === undefined ? null : new Date(r.closedAt), raw: { firstRunId: r.firstRunId ?? null } };
        })();
      },
    },
  } as unknown as Pick<Client, 'workflow'>;
  return { client, lists };
}

/** Ticks every second from `t0` up to `t0 + untilMs`; the first tick (ms after t0) whose answer includes `run`, or null. */
async function foundAt(book: RunningMoves, tracked: TrackedMove[], run: string, t0: number, untilMs: number): Promise<number | null> {
  for (let s = 0; s * 1_000 <= untilMs; s++) {
    vi.setSystemTime(t0 + s * 1_000);
    if ((await book.toDescribe(tracked)).asked.some((m) => m.runId === run)) return s * 1_000;
    // Let a whole list begun beside this tick come in before the next.
    await vi.advanceTimersByTimeAsync(0);
  }
  return null;
}

describe('the book of moves in progress', () => {
  beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => vi.useRealTimers());

  it('vouches for the runs listed in progress and those started since the list, and names the rest to describe', async () => {
    const t0 = Date.now();
    const { client } = visibility([
      { runId: 'listed', startedAt: t0 - 60_000 },
      { runId: 'gone', startedAt: t0 - 120_000, closedAt: t0 - 90_000 },
    ]);
    const book = new RunningMoves(client, 'rebalancer');
    const tracked = [move('listed', t0 - 60_000), move('gone', t0 - 120_000), move('new', t0 + 500)];
    // `new` started after the list and closed after it if at all: a close the looks hold once visibility lists it.
    expect((await book.toDescribe(tracked)).asked.map((m) => m.runId)).toEqual(['gone']);
  });

  it('names a vouched run to describe once visibility lists its close, and lists the runs in progress whole only now and then', async () => {
    const t0 = Date.now();
    const runs: Run[] = [{ runId: 'a', startedAt: t0 - 10_000 }];
    const { client, lists } = visibility(runs);
    const book = new RunningMoves(client, 'rebalancer');
    const tracked = [move('a', t0 - 10_000)];
    expect(await book.toDescribe(tracked)).toEqual({ asked: [], late: null });
    Object.assign(runs[0]!, { closedAt: t0 + 2_000, closeListedAt: t0 + 2_500 });
    expect(await foundAt(book, tracked, 'a', t0, 10_000)).toBe(3_000);
    expect(lists.running).toBe(1);
    expect(lists.closes).toBe(5);
  });

  it('finds a close visibility lists 10 s late by a wide look, within seconds', async () => {
    const t0 = Date.now();
    const { client } = visibility([{ runId: 'a', startedAt: t0 - 10_000, closedAt: t0 + 1_000, closeListedAt: t0 + 11_000 }]);
    const at = await foundAt(new RunningMoves(client, 'rebalancer'), [move('a', t0 - 10_000)], 'a', t0, 60_000);
    expect(at).toBeGreaterThanOrEqual(11_000);
    // Without the wide looks it would wait for the next whole list (FULL_LIST_EVERY_MS).
    expect(at).toBeLessThanOrEqual(16_000);
  });

  it('finds a close visibility lists later than its whole lag by the next whole list, which no longer lists the run', async () => {
    const t0 = Date.now();
    const { client, lists } = visibility([{ runId: 'a', startedAt: t0 - 10_000, closedAt: t0 + 1_000, closeListedAt: t0 + 40_000 }]);
    const at = await foundAt(new RunningMoves(client, 'rebalancer'), [move('a', t0 - 10_000)], 'a', t0, 3 * FULL_LIST_EVERY_MS);
    expect(at).toBeGreaterThan(40_000);
    expect(at).toBeLessThanOrEqual(2 * FULL_LIST_EVERY_MS + 2_000);
    expect(lists.running).toBeGreaterThanOrEqual(2);
  });

  it('a tick describes only what the book names; without a book it describes every move', async () => {
    const described: string[] = [];
    const client = {
      workflow: {
        getHandle: (workflowId: string) => ({
          describe: () => {
            described.push(workflowId);
            return Promise.resolve({ runId: workflowId.slice('reconfigure-q-'.length), status: { name: 'COMPLETED' }, raw: { workflowExecutionInfo: {} }, memo: { outcome: { status: 'completed' } } });
          },
        }),
      },
    } as unknown as Parameters<typeof endsOf>[0];
    const tracked = [move('a', 0), move('b', 0)];
    const withBook = await endsOf(client, tracked, { toDescribe: () => Promise.resolve({ asked: [tracked[1]!], late: null }) });
    expect(withBook.ends).toEqual([null, { workflowId: 'reconfigure-q-b', runId: 'b', status: 'completed', detail: null }]);
    expect([withBook.described, described]).toEqual([1, ['reconfigure-q-b']]);
    const withoutBook = await endsOf(client, tracked, null);
    expect([withoutBook.described, withoutBook.ends.filter((e) => e === null)]).toEqual([2, []]);
  });
});
