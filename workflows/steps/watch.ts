/**
 * What a reconfiguration's workflow knows of the broker: the partition's generation and epoch, a pending
 * recovery, each replica's durable offset, transfer progress and liveness, who is admitted, admission and the
 * final boundary. Fed by the signal handlers of rules/definitions.ts, by reads and by the replies of guarded writes;
 * every change bumps `version`, which is what `waitFor` waits on (with one poll timer at a time). Transfer
 * progress is stamped with the broker's clock, and a transfer's stall abort and catch-up deadline are set by
 * timers (the rule: step.ts).
 */
import { condition, proxyActivities, proxyLocalActivities, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities, MoveContext, WriteOutcome } from '../../activities';
import type { GuardedWriteName, Partition, PartitionView, Progress, WriteReply } from '../../cluster/contract';
import { admittedSignal, nodeSignal, progressSignal, recoverySignal, type MoveTiming } from '../../rules/definitions';
import { TargetWatch, type TargetReport } from '../../rules/follower-move-rules';
import { legacyNow } from './legacy-clock';

export const DEFAULT_TIMING: MoveTiming = {
  stallReportMs: 30_000,
  stallAbortMs: 10 * 60_000,
  catchUpBaseMs: 10 * 60_000,
  catchUpFloorBytesPerSec: 1_000_000,
  pollMs: 30_000,
  retryMs: 2_000,
};

export const ACTIVITY_OPTIONS = {
  startToCloseTimeout: '10s',
  // Broker unreachable or restarting: keep trying.
  retry: { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '10s' },
} as const;
// Before patch decide-on-timers a read was a local activity (no server round trip); its result can reach the
// workflow a task later in the first run than on replay (step.ts), so a read is now a normal activity, whose
// completion is an event in history.
const { readMoveContext: readLocally } = proxyLocalActivities<Activities>(ACTIVITY_OPTIONS);
// A guarded write is a normal activity: the server records its input, so every retry sends the same body
// under the same idempotency key and gets the first reply back.
const { guardedWrite, readMoveContext } = proxyActivities<Activities>(ACTIVITY_OPTIONS);

/** Executions that have it read with normal activities and decide every deadline, bound and stall on timers. */
export const DECIDE_ON_TIMERS = 'decide-on-timers';

/** What ends a wait early: the step's caller decides what each means. */
export type Interrupt = 'recovery' | 'cancel' | 'node_down' | 'stalled' | 'deadline';

/** A transfer to a learner this operation added: what its stall abort and catch-up deadline are decided on. */
export interface WatchedTransfer {
  watch: TargetWatch;
  /** Before the patch: the workflow clock when the attempt started. */
  startedAt: number;
  bytesToCopy: number;
  /** Bumped by every new attempt: a timer armed for an earlier one changes nothing when it fires. */
  attempt: number;
  /** A stall timer is pending for this attempt. */
  stallArmed: boolean;
  /** Set by the stall timer: the stall it was armed for lasted stallAbortMs. */
  stallExpired: boolean;
  /** How long the deadline timers of this attempt have run, and whether the time allowed ran out. */
  deadlineRan: number;
  deadlineExpired: boolean;
}

/** One replica as the workflow last heard of it. */
export interface ReplicaKnowledge {
  /** The highest durable offset reported (a read after a refusal may lower it: the broker's word wins). */
  durable: number;
  bytesRemaining: number | null;
  live: boolean;
  admitted: boolean;
}

export class Watch {
  generation = 0;
  epoch = 0;
  recoveryPending = false;
  /** The epoch a pending recovery replaces: only an activation past it clears the pending state. */
  private recoveringEpoch = -1;
  /** The partition record as last read or returned by a write (null before the first). */
  partition: Partition | null = null;
  /** The highest confirmed tail of any progress read or signal. */
  confirmedTail: number | null = null;
  /** close-admission's final boundary, while admission is closed by this operation. */
  finalBoundary: number | null = null;
  /** Bumped by every change: waits re-check their condition when it moves. */
  version = 0;
  private readonly replicas = new Map<string, ReplicaKnowledge>();
  /** Generation of the add-learner write per node: an `admitted` event older than it is from an earlier learner. */
  private readonly learnerSince = new Map<string, number>();
  /** Transfer watches of the learners this operation added, for stalls and the catch-up deadline. */
  private readonly transfers = new Map<string, WatchedTransfer>();
  /** The latest broker clock reading seen (a read's `now`, a progress event's `at`). */
  private brokerNow = 0;
  private readonly nodeSeq = new Map<string, number>();
  private writeSeq = 0;
  private pollDue = false;
  private pollArmed = false;
  /** Called whenever a wait goes on waiting, with what it waits for (the operation shows it). */
  onBlocked: (reason: string) => void = () => undefined;

  constructor(
    readonly partitionId: string,
    readonly timing: MoveTiming,
    /** Patch decide-on-timers: reads are normal activities and time decisions are set by timers. */
    readonly onTimers: boolean,
    /** The workflow timer (unit tests give a fake one). */
    private readonly timer: (ms: number) => Promise<void> = sleep,
  ) {}

  replica(node: string): ReplicaKnowledge {
    let r = this.replicas.get(node);
    if (!r) {
      r = { durable: -1, bytesRemaining: null, live: true, admitted: false };
      this.replicas.set(node, r);
    }
    return r;
  }

  durable(node: string): number {
    return this.replica(node).durable;
  }

  live(node: string): boolean {
    return this.replica(node).live;
  }

  admitted(node: string): boolean {
    return this.replica(node).admitted;
  }

  /** Install the signal handlers: progress, admission, recovery and node liveness all feed this watch. */
  listen(): void {
    setHandler(progressSignal, (p) => {
      this.noteGeneration(p.generation);
      this.confirmedTail = Math.max(this.confirmedTail ?? -1, p.confirmedTail);
      // The event's own time; a relay from before `at` existed leaves the latest broker time known.
      const at = this.onTimers ? this.noteBrokerTime(p.at) : legacyNow();
      for (const r of p.replicas) this.noteReplica(r.node, { ...r, stalledSince: r.stalled ? at : null }, at);
      this.version++;
    });
    setHandler(admittedSignal, (a) => {
      this.noteGeneration(a.generation);
      if (a.generation > (this.learnerSince.get(a.node) ?? -1)) this.replica(a.node).admitted = true;
      this.version++;
    });
    setHandler(recoverySignal, (r) => {
      if (r.state === 'opened' && r.epoch >= this.epoch) this.openRecovery(r.epoch);
      if (r.state === 'activated' && r.epoch > this.recoveringEpoch) {
        this.recoveryPending = false;
        this.epoch = r.epoch;
        this.noteGeneration(r.generation);
      }
      this.version++;
    });
    setHandler(nodeSignal, (n) => {
      if (n.seq !== undefined) {
        if (n.seq < (this.nodeSeq.get(n.node) ?? -1)) return;
        this.nodeSeq.set(n.node, n.seq);
      }
      this.replica(n.node).live = n.live;
      this.version++;
    });
  }

  noteGeneration(g: number | undefined): void {
    if (g !== undefined && g > this.generation) this.generation = g;
  }

  private openRecovery(epoch: number): void {
    this.recoveryPending = true;
    this.recoveringEpoch = Math.max(this.recoveringEpoch, epoch);
  }

  private noteBrokerTime(at: number | undefined): number {
    if (at !== undefined) this.brokerNow = Math.max(this.brokerNow, at);
    return this.brokerNow;
  }

  /** `at`: the broker's time of the report, or before the patch the workflow clock when it came. */
  private noteReplica(node: string, report: TargetReport & { live?: boolean }, at: number): void {
    const r = this.replica(node);
    if (report.durableOffset > r.durable) {
      r.durable = report.durableOffset;
      r.bytesRemaining = report.bytesRemaining;
    } else if (report.durableOffset === r.durable) {
      r.bytesRemaining = Math.min(r.bytesRemaining ?? report.bytesRemaining, report.bytesRemaining);
    }
    if (report.live !== undefined) r.live = report.live;
    const t = this.transfers.get(node);
    if (t) {
      t.bytesToCopy = Math.max(t.bytesToCopy, report.bytesRemaining);
      t.watch.note(report, at);
      if (this.onTimers) this.armStall(t);
    }
  }

  /** Take in a partition record (from a write reply or a read); a record older than what signals said changes nothing it should not. */
  notePartition(p: Partition): void {
    // An activity result applied after a signal in the same activation may be older: it never takes back what
    // a newer generation or epoch told us.
    const fresh = p.generation >= this.generation;
    this.epoch = Math.max(this.epoch, p.epoch);
    this.noteGeneration(p.generation);
    if (p.pendingRecovery) this.openRecovery(p.pendingRecovery.epoch);
    else if (p.epoch > this.recoveringEpoch) this.recoveryPending = false;
    for (const node of [p.owner, ...p.followers, ...p.learners, ...(p.leaving ? [p.leaving] : [])]) {
      const admitted = p.history.some((h) => h.node === node && !h.suspended);
      if (fresh || admitted) this.replica(node).admitted = admitted;
    }
    if (fresh) {
      this.partition = p;
      if (p.admission === 'open') this.finalBoundary = null;
    }
    this.version++;
  }

  private noteProgress(progress: Progress): void {
    this.confirmedTail = Math.max(this.confirmedTail ?? -1, progress.confirmedTail);
    const at = this.onTimers ? this.noteBrokerTime(progress.now) : legacyNow();
    for (const t of progress.replicas) {
      // Before the patch the stall clock ran on the workflow's clock: carry over how long ago the stall began.
      const stalledSince = t.stalledSince === null || this.onTimers ? t.stalledSince : at - Math.max(0, progress.now - t.stalledSince);
      this.noteReplica(
        t.node,
        { durableOffset: t.durableOffset, bytesRemaining: t.bytesRemaining, phase: t.phase, stalledSince, pausedForRecovery: t.pausedForRecovery, live: t.live },
        at,
      );
    }
  }

  absorb(view: PartitionView, nodes?: MoveContext['nodes']): void {
    this.notePartition(view.partition);
    this.noteProgress(view.progress);
    for (const n of nodes ?? []) this.replica(n.id).live = n.live;
  }

  /** Read the partition, its progress and the nodes (a local activity) and take them in. */
  async read(): Promise<MoveContext> {
    const ctx = await (this.onTimers ? readMoveContext : readLocally)(this.partitionId);
    this.absorb(ctx.view, ctx.nodes);
    return ctx;
  }

  /**
   * Re-read T's durable offset from the broker, for when the broker's word must win over the maximum signals
   * reported (a lost disk can lower it).
   */
  async rereadDurable(node: string): Promise<void> {
    const { view } = await this.read();
    this.replica(node).durable = view.progress.replicas.find((x) => x.node === node)?.durableOffset ?? -1;
  }

  /**
   * Send one guarded write under the generation the workflow knows, with an idempotency key derived from the
   * run; the reply is taken in, with the reply of a write chained to it (`then`, sent by the activity under the
   * generation the first reply gives) and the progress read after them (`readProgress`).
   */
  async write(
    name: GuardedWriteName,
    body: Record<string, unknown>,
    summary: string,
    options: { readProgress?: boolean; then?: { write: GuardedWriteName; body: Record<string, unknown> } } = {},
  ): Promise<WriteOutcome> {
    const info = workflowInfo();
    const key = (write: GuardedWriteName) => `${info.workflowId}/${info.runId}/${++this.writeSeq}-${write}`;
    const request = { ...body, expectedGeneration: this.generation, idempotencyKey: key(name) };
    const then = options.then ? { write: options.then.write, request: { ...options.then.body, idempotencyKey: key(options.then.write) } } : undefined;
    const reply = await guardedWrite.executeWithOptions(
      { ...ACTIVITY_OPTIONS, summary },
      // The activity's generic signature does not survive proxying; the body matches `name`'s schema.
      [this.partitionId, name, request as never, { readProgress: options.readProgress, then }],
    );
    this.noteReply(reply);
    if (reply.then && !('rejected' in reply.then)) this.noteReply(reply.then);
    if (reply.progress) this.noteProgress(reply.progress);
    return reply;
  }

  /** Take in a guarded write's reply: the record it returns, or what its refusal says of the broker. */
  noteReply(reply: WriteReply): void {
    if (reply.ok) {
      this.notePartition(reply.partition);
      return;
    }
    const { code, saw } = reply.refusal;
    // The broker's current generation is its word, even below what signals said: a record deleted and created
    // again under the same id starts over, and late events of the old one must not hold the next write forever.
    if (code === 'generation_mismatch' && typeof saw['current'] === 'number') this.generation = saw['current'];
    if (code === 'pending_recovery') this.openRecovery(this.epoch);
    if (code === 'node_down' && typeof saw['node'] === 'string') this.replica(saw['node']).live = false;
    this.version++;
  }

  /** A learner was added at this generation: admission events older than it are from an earlier learner. */
  learnerAdded(node: string, generation: number): void {
    this.learnerSince.set(node, generation);
    this.replica(node).admitted = false;
  }

  /**
   * Start (or restart, for a new attempt) watching the transfer to `node`: the stall clock and the deadline start
   * now (the latest broker time known; before the patch, the workflow clock).
   */
  trackTransfer(node: string): void {
    const now = this.onTimers ? this.brokerNow : legacyNow();
    const bytesToCopy = this.replica(node).bytesRemaining ?? 0;
    let t = this.transfers.get(node);
    if (t) {
      t.watch.restart(now);
      Object.assign(t, { startedAt: now, bytesToCopy, attempt: t.attempt + 1, stallArmed: false, stallExpired: false, deadlineRan: 0, deadlineExpired: false });
    } else {
      t = { watch: new TargetWatch(false, now), startedAt: now, bytesToCopy, attempt: 0, stallArmed: false, stallExpired: false, deadlineRan: 0, deadlineExpired: false };
      this.transfers.set(node, t);
    }
    if (!this.onTimers) return;
    this.armStall(t);
    this.armDeadline(t);
  }

  /** The watched transfer to `node`, if any. */
  transfer(node: string): WatchedTransfer | undefined {
    return this.transfers.get(node);
  }

  /** How long the transfer to `node` has made no progress (as of its latest report), for words. */
  stalledFor(node: string): number {
    const t = this.transfers.get(node);
    if (!t) return 0;
    return t.watch.stalledFor(this.onTimers ? t.watch.lastSeen : legacyNow());
  }

  /** The transfer to `node` made no progress for stallAbortMs. */
  stalledTooLong(node: string): boolean {
    const t = this.transfers.get(node);
    if (!t) return false;
    return this.onTimers ? t.stallExpired : t.watch.stalledFor(legacyNow()) >= this.timing.stallAbortMs;
  }

  /**
   * The transfer to `node` ran past its catch-up deadline: a base plus the largest transfer it reported at the
   * floor rate (a step's timeout in proportion to the bytes it moves, like PD's), extended by time paused for
   * recovery.
   */
  pastCatchUpDeadline(node: string): boolean {
    const t = this.transfers.get(node);
    if (!t) return false;
    if (this.onTimers) return t.deadlineExpired;
    return legacyNow() >= t.startedAt + t.watch.pausedFor(legacyNow()) + this.allowedBeforePause(t);
  }

  private allowedBeforePause(t: WatchedTransfer): number {
    return this.timing.catchUpBaseMs + Math.ceil((t.bytesToCopy / this.timing.catchUpFloorBytesPerSec) * 1000);
  }

  /** A workflow timer whose firing changes what the watch knows: waits look again when it fires. */
  after(ms: number, fired: () => void): void {
    void this.timer(Math.max(1, ms)).then(() => {
      fired();
      this.version++;
    });
  }

  /**
   * One stall timer at a time per attempt, armed while the transfer is stalled for the time left to
   * stallAbortMs (as of its latest report). It expires the stall only if that stall is the one still going on
   * (no progress, pause or new attempt since); otherwise it arms again for the stall of the moment, if any.
   */
  private armStall(t: WatchedTransfer): void {
    const start = t.watch.stallStart();
    if (t.stallArmed || t.stallExpired || start === null) return;
    t.stallArmed = true;
    const attempt = t.attempt;
    this.after(this.timing.stallAbortMs - t.watch.stalledFor(t.watch.lastSeen), () => {
      if (t.attempt !== attempt) return;
      t.stallArmed = false;
      if (t.watch.stallStart() === start) t.stallExpired = true;
      else this.armStall(t);
    });
  }

  /**
   * The catch-up deadline as timers: armed for the time allowed when the attempt starts; when it fires and the
   * time allowed grew meanwhile (more bytes reported, time paused for recovery), armed again for the rest. While
   * the transfer is paused it never expires.
   */
  private armDeadline(t: WatchedTransfer): void {
    const attempt = t.attempt;
    const allowed = () => this.allowedBeforePause(t) + t.watch.pausedFor(t.watch.lastSeen);
    const wait = Math.max(allowed() - t.deadlineRan, t.watch.paused ? this.timing.pollMs : 0);
    this.after(wait, () => {
      if (t.attempt !== attempt) return;
      t.deadlineRan += Math.max(1, wait);
      if (!t.watch.paused && t.deadlineRan >= allowed()) t.deadlineExpired = true;
      else this.armDeadline(t);
    });
  }

  /** Wait `retryMs` after a passing refusal, or less if `stop` turns true. */
  async pause(stop: () => boolean = () => false): Promise<void> {
    await condition(stop, this.timing.retryMs);
  }

  /**
   * Wait until `done` or an interrupt, re-reading the broker when the poll timer is due. One poll timer at a
   * time, whatever signals arrive meanwhile: a delayed or dropped event costs at most pollMs, and no timer is
   * started per signal or per wait. A caller that re-reads on its own timer (an interrupt) asks for no poll:
   * two read timers in one wait could fire beside a read's result in the first run and apart from it on replay.
   */
  async waitFor<I extends string>(done: () => boolean, interrupts: () => I | null, describe: () => string, poll = true): Promise<I | null> {
    for (;;) {
      if (done()) return null;
      const why = interrupts();
      if (why) return why;
      this.onBlocked(describe());
      if (poll && this.pollDue) {
        this.pollDue = false;
        await this.read();
        continue;
      }
      if (poll) this.armPoll();
      const seen = this.version;
      await condition(() => this.version !== seen);
    }
  }

  private armPoll(): void {
    if (this.pollArmed) return;
    this.pollArmed = true;
    void sleep(this.timing.pollMs).then(() => {
      this.pollArmed = false;
      this.pollDue = true;
      this.version++;
    });
  }
}
