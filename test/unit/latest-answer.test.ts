/**
 * The admin pages' view of the loop (admin/latest.ts): a busy loop answers its status query only between its workflow
 * tasks (3-30 s with 1,000 moves in flight on two cores), so a page waits at most its bound and then shows the last
 * answer with its time; the list of moves, while lists come slower than the bound, is not waited for at all.
 */
import { describe, expect, it, vi } from 'vitest';
import { LatestAnswer } from '../../admin/latest';

/** A source whose answers come when the test says, counting the questions. */
function source() {
  const waiting: ((v: string) => void)[] = [];
  const failing: ((e: Error) => void)[] = [];
  const ask = () =>
    new Promise<string>((resolve, reject) => {
      waiting.push(resolve);
      failing.push(reject);
    });
  return { ask, waiting, failing };
}

describe('the latest answer within a bound', () => {
  it('waits for the first answer, however late; then gives the last one, marked late, when a fresh one does not come in time', async () => {
    const s = source();
    const latest = new LatestAnswer(s.ask, 30);
    const first = latest.get();
    await new Promise((r) => setTimeout(r, 60));
    s.waiting[0]!('running');
    expect(await first).toMatchObject({ value: 'running', late: false });

    const started = Date.now();
    const second = await latest.get();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(second).toMatchObject({ value: 'running', late: true });

    // The question still out is shared, not asked again; its answer is the next page's.
    const third = latest.get();
    expect(s.waiting).toHaveLength(2);
    s.waiting[1]!('paused');
    expect(await third).toMatchObject({ value: 'paused', late: false });
  });

  it('takes an answer offered (an update reply) as the last one, and a failure that came in time fails the page', async () => {
    const s = source();
    const latest = new LatestAnswer(s.ask, 30);
    latest.offer('paused');
    const page = latest.get();
    s.failing[0]!(new Error('no poller'));
    await expect(page).rejects.toThrow('no poller');
    const late = await latest.get();
    expect(late).toMatchObject({ value: 'paused', late: true });
  });

  it("a question an earlier page asked that fails in a later page's bound gives that page the last answer; the next page asks again", async () => {
    const s = source();
    const latest = new LatestAnswer(s.ask, 50);
    const first = latest.get();
    s.waiting[0]!('running');
    await first;
    // Asked, and not answered within the bound: the last answer, late.
    expect(await latest.get()).toMatchObject({ value: 'running', late: true });
    expect(s.waiting).toHaveLength(2);
    // The next page shares that question, which fails (a query timed out) while it waits.
    const page = latest.get();
    expect(s.waiting).toHaveLength(2);
    s.failing[1]!(new Error('query timed out'));
    expect(await page).toMatchObject({ value: 'running', late: true });
    // Its own question failing in time fails the page.
    const next = latest.get();
    expect(s.waiting).toHaveLength(3);
    s.failing[2]!(new Error('no poller'));
    await expect(next).rejects.toThrow('no poller');
  });

  it('gives an answer younger than its freshness without asking, and asks again once told to forget it', async () => {
    const s = source();
    const latest = new LatestAnswer(s.ask, 30, { freshForMs: 60_000 });
    const first = latest.get();
    s.waiting[0]!('two moves');
    expect(await first).toMatchObject({ value: 'two moves', late: false });
    expect(await latest.get()).toMatchObject({ value: 'two moves', late: false });
    expect(s.waiting).toHaveLength(1);

    latest.forget();
    const asked = latest.get();
    expect(s.waiting).toHaveLength(2);
    s.waiting[1]!('three moves');
    expect(await asked).toMatchObject({ value: 'three moves', late: false });
  });

  it('while questions take longer than the bound, gives a young last answer at once; waits again once told to forget, when it is old, or once questions are quick', async () => {
    vi.useFakeTimers();
    try {
      const s = source();
      const latest = new LatestAnswer(s.ask, 30, { lastAtOnceWithinMs: 5_000 });
      const page = () => {
        const state = { done: false };
        return { state, answer: latest.get().finally(() => (state.done = true)) };
      };
      const first = latest.get();
      vi.advanceTimersByTime(60);
      s.waiting[0]!('ten moves');
      expect(await first).toMatchObject({ value: 'ten moves', late: false });

      // The question took 60 ms against a 30 ms bound: the next page has the last answer at once, and asks for a later one.
      const atOnce = page();
      await vi.advanceTimersByTimeAsync(0);
      expect(atOnce.state.done).toBe(true);
      expect(await atOnce.answer).toMatchObject({ value: 'ten moves', late: true });
      expect(s.waiting).toHaveLength(2);

      // Told to forget (a move started here): the page waits for the question out, which comes 40 ms after it was asked.
      vi.advanceTimersByTime(40);
      latest.forget();
      const forgotten = page();
      await vi.advanceTimersByTimeAsync(0);
      expect(forgotten.state.done).toBe(false);
      s.waiting[1]!('eleven moves');
      expect(await forgotten.answer).toMatchObject({ value: 'eleven moves', late: false });

      // An answer older than 5 s is waited for, within the bound.
      vi.advanceTimersByTime(6_000);
      const old = page();
      await vi.advanceTimersByTimeAsync(0);
      expect(old.state.done).toBe(false);
      await vi.advanceTimersByTimeAsync(30);
      expect(await old.answer).toMatchObject({ value: 'eleven moves', late: true });

      // Questions quick again (this one within the bound): the next page waits.
      s.waiting[2]!('twelve moves');
      await vi.advanceTimersByTimeAsync(0);
      const quick = page();
      await vi.advanceTimersByTimeAsync(0);
      expect(quick.state.done).toBe(false);
      await vi.advanceTimersByTimeAsync(30);
      expect(await quick.answer).toMatchObject({ value: 'twelve moves', late: true });
    } finally {
      vi.useRealTimers();
    }
  });
});
