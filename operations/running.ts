/**
 * Which of the moves a loop or drain tracks still run, as visibility vouches for them, so a tick asks Temporal about
 * only the few it cannot vouch for. With 1,000 moves in flight a describe of each took 3.5 s of every tick, and one
 * list of the 1,000 runs in progress 0.3 s on an idle machine and 1.2-1.7 s beside them: neither fits a 100 ms tick.
 */
import type { Client } from '@temporalio/client';
import { RECONFIGURATION_ID_PREFIX, type TrackedMove } from '../rules/definitions';
import { VISIBILITY_LAG_MS } from '../rules/rebalancer-rules';
import { Looks } from './closed';
import { runsInProgress } from './moves';

/** How often the runs in progress are listed whole, beside the ticks (a list of 1,000 takes 0.3-1.7 s). */
export const FULL_LIST_EVERY_MS = 30_000;

/** The runs a whole list found in progress, and the time from which every close is held for them (its start less the lag). */
interface Listed {
  runs: Set<string>;
  from: number;
}

/**
 * One task queue's reconfigurations in progress, kept from visibility: a whole list of the runs in progress every
 * `FULL_LIST_EVERY_MS` (the first awaited, the rest beside the ticks), and at each tick a look at the runs that closed
 * since the last look (`Looks`: a few rows). A tracked run is running when it was listed in progress or started after
 * the list's `from`, and no close of it has been listed since `from`: a run that started after `from` and ended closed
 * after it, so its close is among those held once visibility lists it. Every other tracked run is described.
 *
 * Visibility's lag only delays an end: a close listed late is found by a wide look (up to `VISIBILITY_LAG_MS`) or,
 * later still, by the next whole list, which no longer lists the run.
 */
export class RunningMoves {
  private listed: Listed | null = null;
  private next: Promise<void> | null = null;
  private ready: Listed | null = null;
  /** Runs listed closed since the oldest `from` in use, each (and its chain's first run) with its close time. */
  private readonly closed = new Map<string, number>();
  private readonly looks = new Looks();

  constructor(
    private readonly client: Pick<Client, 'workflow'>,
    private readonly taskQueue: string,
    private readonly onListFailed: (err: unknown) => void = () => undefined,
  ) {}

  /**
   * The tracked moves visibility does not vouch for as running: ask Temporal about each of these. The look at the
   * closes is waited for until `enough` settles (`listedWithin`); a look still under way then leaves some ends to a
   * later tick (a move counted in flight a little longer), and `late` settles with what to describe once it has listed
   * (nothing more, when it failed).
   */
  async toDescribe(tracked: readonly TrackedMove[], enough?: Promise<unknown>): Promise<{ asked: TrackedMove[]; late: Promise<TrackedMove[]> | null }> {
    this.adopt();
    if (this.listed === null) this.listed = await this.listRunning();
    else if (this.next === null && Date.now() - this.listed.from - VISIBILITY_LAG_MS >= FULL_LIST_EVERY_MS) this.next = this.listBeside();
    const { looked, listed: within } = this.looks.runWithin(this.listed.from, Infinity, (since, now) => this.look(since, now), enough);
    const listed = await within;
    // A look that fails after the tick went on is the next tick's to make again; `late` never fails.
    const late = listed ? null : looked.then(
      () => this.unvouched(tracked),
      (err: unknown) => {
        this.onListFailed(err);
        return [];
      },
    );
    return { asked: this.unvouched(tracked), late };
  }

  private unvouched(tracked: readonly TrackedMove[]): TrackedMove[] {
    const { runs, from } = this.listed!;
    return tracked.filter((m) => this.closed.has(m.runId) || !(runs.has(m.runId) || m.startedAt > from));
  }

  private async listRunning(): Promise<Listed> {
    const from = Date.now() - VISIBILITY_LAG_MS;
    return { runs: await runsInProgress(this.client, this.taskQueue), from };
  }

  /** A whole list beside the ticks, taken in by the first tick after it (`adopt`); a failed one is tried at a later tick. */
  private listBeside(): Promise<void> {
    return this.listRunning().then(
      (listed) => {
        this.ready = listed;
      },
      (err: unknown) => {
        this.next = null;
        this.onListFailed(err);
      },
    );
  }

  /** Takes in a whole list that came in: the closes held from its `from` on are all it needs. */
  private adopt(): void {
    if (this.ready === null) return;
    const { from } = (this.listed = this.ready);
    this.ready = null;
    this.next = null;
    for (const [run, closedAt] of this.closed) if (closedAt <= from) this.closed.delete(run);
  }

  private async look(since: number, now: number): Promise<void> {
    const query =
      `WorkflowId STARTS_WITH "${RECONFIGURATION_ID_PREFIX}" AND TaskQueue = ${JSON.stringify(this.taskQueue)} AND ` +
      `ExecutionStatus != "Running" AND CloseTime > "${new Date(since).toISOString()}"`;
    for await (const wf of this.client.workflow.list({ query })) {
      const closedAt = wf.closeTime?.getTime() ?? now;
      this.closed.set(wf.runId, closedAt);
      const first = wf.raw.firstRunId;
      if (first) this.closed.set(first, closedAt);
    }
  }
}
