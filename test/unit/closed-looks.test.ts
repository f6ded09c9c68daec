/**
 * The book of partition cooldowns (operations/closed.ts) looks back only a few seconds at most looks, the whole
 * visibility lag at some: a close visibility lists late is still recorded, a few seconds later. Visibility here is
 * a list over closes, each listed from its own moment on; the query's `CloseTime >` bound is the one read.
 */
import type { Client } from '@temporalio/client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CooledMoves } from '../../operations/closed';
import { PartitionKey, SourceKey, TargetKey } from '../../rules/search-attributes';

interface Close {
  partition: string;
  closedAt: number;
  /** When visibility lists it. */
  listedAt: number;
}

function visibility(closes: Close[]) {
  const sinces: number[] = [];
  const client = {
    workflow: {
      list: ({ query }: { query: string }) => {
        const since = Date.parse(/CloseTime > "([^"]+)"/.exec(query)![1]!);
        sinces.push(since);
        const rows = closes
          .filter((c) => c.listedAt <= Date.now() && c.closedAt > since)
          .map((c) => ({
            workflowId: `reconfigure-${c.partition}`,
            closeTime: new Date(c.closedAt),
            typedSearchAttributes: { get: (k: unknown) => (k === PartitionKey ? c.partition : k === SourceKey ? 'n1' : k === TargetKey ? 'n2' : undefined) },
          }));
        return (async function* () {
          yield* rows;
        })();
      },
    },
  } as unknown as Client;
  return { client, sinces };
}

const WINDOW = 60_000;

describe('the looks of the partition cooldowns book', () => {
  beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => vi.useRealTimers());

  it('looks back 3 s between wide looks, and records a close listed 5.5 s late at the next wide look', async () => {
    const t0 = Date.now();
    const closes: Close[] = [
      { partition: 'q-a', closedAt: t0 + 1_000, listedAt: t0 + 1_200 },
      { partition: 'q-b', closedAt: t0 + 2_500, listedAt: t0 + 8_000 },
    ];
    const { client, sinces } = visibility(closes);
    const book = new CooledMoves(client, 'q');
    const recorded: Record<number, string[]> = {};
    for (let s = 0; s <= 12; s++) {
      vi.setSystemTime(t0 + s * 1_000);
      await book.look(WINDOW, Date.now() - 16_000);
      recorded[s] = Object.keys(await book.current(WINDOW, Infinity)).sort();
    }
    // The first look lists the whole cooldown; a wide look every 5 s; the rest 3 s back from the look before.
    expect(sinces.map((x) => (x - t0) / 1_000)).toEqual([-75, -3, -2, -1, 0, -11, 2, 3, 4, 5, -6, 7, 8]);
    expect(recorded[2]).toEqual(['q-a']);
    expect(recorded[9]).toEqual(['q-a']);
    expect(recorded[10]).toEqual(['q-a', 'q-b']);
  });

  it('looks back the whole lag when the caller asks from further back than its looks cover', async () => {
    const { client, sinces } = visibility([]);
    const book = new CooledMoves(client, 'q');
    await book.look(WINDOW, 0);
    vi.advanceTimersByTime(1_000);
    await book.look(WINDOW, Date.now() - 60_000);
    expect(sinces[1]).toBe(Date.now() - 60_000);
  });
});
