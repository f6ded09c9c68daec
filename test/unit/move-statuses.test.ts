/**
 * The moves page's status queries within a bound: a busy worker answers a query only between its workflow tasks, so
 * the page takes what answered in time and shows the rest as visibility lists them.
 */
import { describe, expect, it } from 'vitest';
import { moveStatusesWithin } from '../../operations/moves';
import type { MoveStatus } from '../../rules/definitions';

/** A client whose status query for each workflow answers after its delay (null: never; 'ended': fails, as an ended run's may). */
function client(delays: Record<string, number | null | 'ended'>) {
  return {
    workflow: {
      getHandle: (workflowId: string) => ({
        query: () => {
          const d = delays[workflowId];
          if (d === 'ended') return Promise.reject(new Error('workflow ended'));
          if (d === null) return new Promise<never>(() => undefined);
          return new Promise((r) => setTimeout(() => r({ partition: workflowId } as unknown as MoveStatus), d));
        },
      }),
    },
  } as unknown as Parameters<typeof moveStatusesWithin>[0];
}

const moves = (...ids: string[]) => ids.map((workflowId) => ({ workflowId }));

describe('status queries within a bound', () => {
  it('takes what answered in time, in order, and names the late ones; an ended run is left out', async () => {
    const c = client({ a: 0, b: 40, c: null, d: 'ended', e: 5 });
    const started = Date.now();
    const { answered, late } = await moveStatusesWithin(c, moves('a', 'b', 'c', 'd', 'e'), 20);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(answered.map((s) => s.partition)).toEqual(['a', 'e']);
    expect(late.map((m) => m.workflowId)).toEqual(['b', 'c']);
    // Without the bound it would wait for c, which never answers.
  }, 2_000);

  it('without a bound waits for every answer', async () => {
    const { answered, late } = await moveStatusesWithin(client({ a: 30, b: 0 }), moves('a', 'b'), null);
    expect(answered.map((s) => s.partition)).toEqual(['a', 'b']);
    expect(late).toEqual([]);
  });
});
