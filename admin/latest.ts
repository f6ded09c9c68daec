/**
 * The latest answer of a source a busy system answers slowly: the loop's status query, which a workflow answers only
 * between its workflow tasks (3-30 s with 1,000 moves in flight on two cores, while the loop started them), and the
 * visibility list of the moves in progress (1-2.4 s of 1,000). A page takes a fresh answer when it comes within its
 * bound, and the last one, with its time, when it does not.
 */
export interface Answer<T> {
  value: T;
  /** Epoch ms the answer came. */
  at: number;
  /** The fresh answer did not come within the bound: this is the last one. */
  late: boolean;
}

export interface LatestOptions {
  /** An answer this young is given without asking again (the list of moves: once a second, however many pages ask). */
  freshForMs?: number;
  /**
   * While questions take longer than the bound, a page takes a last answer younger than this at once, and the question
   * it asks serves a later page: waiting the bound would only end in that answer (the list of moves, 1-2.4 s of 1,000
   * moves on two busy cores against a 250 ms bound). After `forget`, a page waits as before.
   */
  lastAtOnceWithinMs?: number;
}

export class LatestAnswer<T> {
  private last: { value: T; at: number } | null = null;
  /** One question at a time: callers while it is out share it, so a busy loop is not asked again and again. */
  private pending: Promise<{ value: T; at: number }> | null = null;
  /** Until when the last answer is given without asking (epoch ms). */
  private freshUntil = 0;
  /** Told to forget since the last answer: a page waits for the next one (within its bound). */
  private forgotten = false;
  /** How long the last answered question took (ms). */
  private tookMs = 0;

  constructor(
    private readonly ask: () => Promise<T>,
    private readonly withinMs: number,
    private readonly options: LatestOptions = {},
  ) {}

  /** The next page asks again and waits for the answer (something it shows changed: a move started or cancelled); the last answer stays the fallback. */
  forget(): void {
    this.freshUntil = 0;
    this.forgotten = true;
  }

  /** An answer learnt otherwise (the loop's reply to an operator's update), as fresh as a question's. */
  offer(value: T): void {
    this.answered(value);
  }

  private answered(value: T): { value: T; at: number } {
    this.last = { value, at: Date.now() };
    this.freshUntil = this.last.at + (this.options.freshForMs ?? 0);
    this.forgotten = false;
    return this.last;
  }

  /** A fresh answer when it comes within the bound; the last one otherwise; the fresh one, however late, when none came yet. */
  async get(): Promise<Answer<T>> {
    if (this.last !== null && Date.now() < this.freshUntil) return { ...this.last, late: false };
    // A question an earlier page asked may fail in this page's bound (a query timed out after seconds on a busy
    // worker): that failure is not this page's, which shows the last answer; the next page asks again.
    const shared = this.pending !== null;
    const askedAt = Date.now();
    const asked = (this.pending ??= this.ask()
      .then((value) => {
        this.tookMs = Date.now() - askedAt;
        return this.answered(value);
      })
      .finally(() => (this.pending = null)));
    if (this.last === null) return { ...(await asked), late: false };
    const atOnce = this.options.lastAtOnceWithinMs;
    if (atOnce !== undefined && !this.forgotten && this.tookMs > this.withinMs && Date.now() - this.last.at < atOnce) {
      // Asked for a later page; one that fails is asked again by the page after it.
      asked.catch(() => undefined);
      return { ...this.last, late: true };
    }
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<null>((r) => (timer = setTimeout(() => r(null), this.withinMs)));
    // A question that fails after the bound is dropped (`pending` cleared): the next page asks again.
    const fresh = await Promise.race([shared ? asked.catch(() => null) : asked, bound]);
    clearTimeout(timer);
    if (fresh !== null) return { ...fresh, late: false };
    return { ...this.last, late: true };
  }
}
