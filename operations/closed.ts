/**
 * The reconfigurations that completed, as Temporal's visibility lists them, and the partition cooldowns they set
 * (`CooledMove`). The loop keeps those cooldowns here, in the worker, not in its workflow state: they grow with the
 * moves made within a cooldown (thousands at size), and visibility already holds every one of them, so a worker
 * that starts (or a dry run) lists them again.
 */
import type { Client } from '@temporalio/client';
import { DEFAULT_PLANNER_CONFIG } from '../planner/config';
import type { Cooldowns, CooledMove } from '../planner/types';
import { drainWorkflowId, RECONFIGURATION_ID_PREFIX, type RebalancerStatus } from '../rules/definitions';
import { cool, VISIBILITY_LAG_MS, type ClosedReconfiguration } from '../rules/rebalancer-rules';
import { PartitionKey, SourceKey, TargetKey } from '../rules/search-attributes';

/**
 * A running reconfiguration in one of these phases is past its point of no return (its last write is made or being
 * made): it only finishes. Visibility may still list it as running for a moment after its last write, while the
 * topology already shows the change, so it is cooled as if it had just completed.
 */
const FINISHING_PHASES = ['removing', 'promoting', 'committing_owner', 'completed'];

/**
 * The reconfigurations on this task queue that completed after `since`, and those finishing now, from visibility: a
 * move's last phase is `completed` only when its outcome is, and its source and target attributes name the nodes
 * the copy (or owner role) left and arrived on.
 */
async function closedSince(client: Client, taskQueue: string, since: number): Promise<ClosedReconfiguration[]> {
  const finishing = FINISHING_PHASES.map((phase) => `RebalancePhase = "${phase}"`).join(' OR ');
  const query =
    `WorkflowId STARTS_WITH "${RECONFIGURATION_ID_PREFIX}" AND TaskQueue = ${JSON.stringify(taskQueue)} AND (` +
    `(ExecutionStatus = "Completed" AND RebalancePhase = "completed" AND CloseTime > "${new Date(since).toISOString()}") OR ` +
    `(ExecutionStatus = "Running" AND (${finishing})))`;
  const closed: ClosedReconfiguration[] = [];
  const now = Date.now();
  for await (const wf of client.workflow.list({ query })) {
    const attrs = wf.typedSearchAttributes;
    const to = attrs.get(TargetKey);
    if (to === undefined) continue;
    // A drain's move sets no cooldown of the loop's: it is no judgement of where the copy balances best, only that it
    // leaves the node. The draining mark keeps every copy off that node for as long as the drain wants it, and an
    // undrain is the operator asking for the node to be used again at once, by the copies the drain put elsewhere too.
    if (wf.parentExecution?.workflowId?.startsWith(drainWorkflowId('')) === true) continue;
    const closedAt = wf.closeTime?.getTime() ?? now;
    closed.push({ partition: attrs.get(PartitionKey) ?? wf.workflowId.slice(RECONFIGURATION_ID_PREFIX.length), from: attrs.get(SourceKey) ?? null, to, closedAt });
  }
  return closed;
}

/**
 * How far back a look lists between wide ones: visibility lists nearly every close within this. Each row listed is
 * about a millisecond of the loop's tick, and a look back the whole `VISIBILITY_LAG_MS` every tick listed every
 * close of the last 15 s again (40-90 rows while 10 nodes join 1,000).
 */
const NARROW_LAG_MS = 3_000;
/** How often a look goes back the whole `VISIBILITY_LAG_MS`, for a close visibility listed later than `NARROW_LAG_MS`. */
const WIDE_EVERY_MS = 5_000;

/**
 * The windows of a book's looks at the closes visibility lists: each look lists from a little before the last, a
 * wide one from the whole lag before it now and then, so a close listed late is found a few seconds later.
 */
export class Looks {
  private lookedAt: number | null = null;
  private wideAt = 0;
  private begunAt: number | null = null;
  /** The look under way: one at a time, so a tick that stopped waiting for it leaves it to the next (`listedWithin`). */
  private running: Promise<void> | null = null;

  /**
   * Lists with `list` from where a look begun now starts (`since`), or joins the look under way; settles once that
   * look has listed. A look that fails is dropped: the next call begins another.
   */
  run(first: number, after: number, list: (since: number, now: number) => Promise<void>): Promise<void> {
    if (this.running !== null) return this.running;
    const now = (this.begunAt = Date.now());
    const looked = list(this.since(now, first, after), now).then(() => this.done(now));
    this.running = looked.finally(() => (this.running = null));
    return this.running;
  }

  /**
   * Where a look at `now` lists closes from: `first` at the first look; after that back the whole lag every
   * `WIDE_EVERY_MS`, or from `after` when that is further back than a wide look's period before the whole lag (the
   * loop asks from its own last look less the lag, a little before this book's; further back, it missed looks:
   * another worker's book); `NARROW_LAG_MS` before the last look otherwise.
   */
  since(now: number, first: number, after = Infinity): number {
    if (this.lookedAt === null || now - this.wideAt >= WIDE_EVERY_MS || after < this.lookedAt - VISIBILITY_LAG_MS - WIDE_EVERY_MS) {
      this.wideAt = now;
      return this.lookedAt === null ? first : Math.min(this.lookedAt - VISIBILITY_LAG_MS, after);
    }
    return this.lookedAt - NARROW_LAG_MS;
  }

  /** The look begun at `now` has listed its closes. */
  done(now: number): void {
    this.lookedAt = now;
  }

  /** When the last look that listed began, null before the first. */
  get last(): number | null {
    return this.lookedAt;
  }

  /**
   * `run`, waited for until `enough` settles (`listedWithin`), except the first look, waited for whole: there is
   * nothing listed yet to go on with. Whether the look had listed by then.
   */
  runWithin(first: number, after: number, list: (since: number, now: number) => Promise<void>, enough?: Promise<unknown>): { looked: Promise<void>; listed: Promise<boolean> } {
    const firstLook = this.lookedAt === null;
    const looked = this.run(first, after, list);
    return { looked, listed: listedWithin(looked, firstLook ? undefined : enough) };
  }

  /** When the last look began, listed or under way; null before the first. */
  get begun(): number | null {
    return this.begunAt;
  }
}

/**
 * Whether `look` has listed by the time `enough` settles (at once when it is absent). A tick waits for Temporal's lists
 * only as long as its reads of the broker take, and a little more: on a dev server busy with 1,000 moves a list takes
 * 50-700 ms, where the broker's reads take 60. Past that the tick goes on with what the book holds, and the look, still
 * under way, serves the next tick. A look that fails before `enough` fails the tick; after it, the next tick's look.
 */
export async function listedWithin(look: Promise<void>, enough?: Promise<unknown>): Promise<boolean> {
  let listed = false;
  const done = look.then(() => void (listed = true));
  await (enough === undefined ? done : Promise.race([done, enough.then(nothing, nothing)]));
  return listed;
}
const nothing = (): void => undefined;

/**
 * One task queue's partition cooldowns, kept from visibility: the whole cooldown (`windowMs`) listed at the first
 * look; after that, what closed since the last look less `NARROW_LAG_MS`, and every `WIDE_EVERY_MS` (or when the
 * caller asks from further back) less visibility's whole lag, so a close listed late is recorded a few seconds later.
 */
export class CooledMoves {
  private moves: Record<string, CooledMove[]> = {};
  private readonly looks = new Looks();
  /** Closes listed since the last `look` returned, by a look it joined or one a tick stopped waiting for. */
  private unreturned: ClosedReconfiguration[] = [];

  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
  ) {}

  /**
   * Lists what closed since the last look and records it (or joins the look under way), waiting for it until `enough`
   * settles (see `listedWithin`); returns the closes listed since the last call that closed after `after`, when the
   * newest look that listed began (null before the first), and whether the look waited for had listed in time.
   */
  async look(windowMs: number, after = 0, enough?: Promise<unknown>): Promise<{ closed: ClosedReconfiguration[]; listedFrom: number | null; listed: boolean }> {
    const listed = await this.run(windowMs, after, enough).listed;
    const closed = this.unreturned.filter((c) => c.closedAt > after);
    this.unreturned = [];
    return { closed, listedFrom: this.looks.last, listed };
  }

  /** One look's list: records what closed since `since`, keeps it for the next `look` to return, and ends past cooldowns. */
  private async list(since: number, now: number, windowMs: number): Promise<void> {
    const closed = await closedSince(this.client, this.taskQueue, since);
    this.record(closed, windowMs);
    // Ended cooldowns go here, once a look: in place, as the book holds thousands at size and a tick looks every time.
    for (const [partition, list] of Object.entries(this.moves)) {
      const running = list.filter((m) => m.until > now);
      if (running.length === 0) delete this.moves[partition];
      else if (running.length < list.length) this.moves[partition] = running;
    }
    this.unreturned.push(...closed);
  }

  /** Records completed reconfigurations the caller learnt of itself (the loop's own, from Temporal's record of each). */
  record(closed: readonly ClosedReconfiguration[], windowMs: number): void {
    for (const c of closed) cool({}, this.moves, c, c.closedAt, { nodeCooldownMs: 0, partitionCooldownMs: windowMs }, false);
  }

  /**
   * The cooldowns, looked up afresh when the last look began longer than `freshMs` ago. A look this tick's snapshot
   * began and stopped waiting for is not waited for here either: the tick holds what it may not list.
   */
  async current(windowMs: number, freshMs: number): Promise<Record<string, CooledMove[]>> {
    const last = this.looks.begun;
    if (last === null || Date.now() - last > freshMs) await this.run(windowMs, Date.now()).listed;
    return this.moves;
  }

  /** A look of this book (`Looks.runWithin`); the first lists the whole cooldown. */
  private run(windowMs: number, after: number, enough?: Promise<unknown>): { looked: Promise<void>; listed: Promise<boolean> } {
    return this.looks.runWithin(Date.now() - windowMs - VISIBILITY_LAG_MS, after, (since, now) => this.list(since, now, windowMs), enough);
  }

  /** Partitions cooling at the last look. */
  count(): number {
    return Object.keys(this.moves).length;
  }
}

/** `cooldowns` with the partition cooldowns of completed reconfigurations added (a state from an older run may hold some). */
export function withMoves(cooldowns: Cooldowns, moves: Record<string, CooledMove[]>): Cooldowns {
  return { ...cooldowns, moves: cooldowns.moves ? { ...cooldowns.moves, ...moves } : moves };
}

/** The partition cooldowns a loop on `taskQueue` plans with now, listed whole (a dry run holds no book of its own). */
export function cooledMovesOf(client: Client, taskQueue: string, windowMs: number): Promise<Record<string, CooledMove[]>> {
  return new CooledMoves(client, taskQueue).current(windowMs, Infinity);
}

/** The loop's status with the partition cooldowns its plan reads (its worker's book, listed here from visibility). */
export async function withCooledMoves(client: Client, taskQueue: string, loop: RebalancerStatus): Promise<RebalancerStatus> {
  const moves = await cooledMovesOf(client, taskQueue, { ...DEFAULT_PLANNER_CONFIG, ...loop.settings.planner }.partitionCooldownMs);
  return { ...loop, cooldowns: withMoves(loop.cooldowns, moves) };
}
