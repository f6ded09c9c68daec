/**
 * What a reconfiguration's workflow knows of the broker: the partition's generation and epoch, a pending
 * recovery, each replica's durable offset, transfer progress and liveness, who is admitted, admission and the
 * final boundary. Fed by the signal handlers of rules/definitions.ts, by reads and by the replies of guarded writes;
 * every change bumps `version`, which is what `waitFor` waits on (with one poll timer at a time). Transfer
 * progress is stamped with the broker's clock, and a transfer's stall abort and catch-up deadline are set by
 * timers (the rule: step.ts).
 */
import { condition, patched, proxyActivities, proxyLocalActivities, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities, MoveContext, WriteOutcome } from '../../activities';
import type { GuardedWriteName, Partition, PartitionView, Progress, WriteReply } from '../../cluster/contract';
import { admittedSignal, nodeSignal, progressSignal, recoverySignal, type AdmittedSignal, type MoveTiming, type ProgressSignal } from '../../rules/definitions';
import type { TargetReport } from '../../rules/follower-move-rules';
import { legacyNow } from './legacy-clock';
import { ADMITTED_BEFORE_REPLY, type WatchPatches } from './patches';
import { Transfers, type WatchedTransfer } from './transfers';

export const DEFAULT_TIMING: MoveTiming = {
  stallReportMs: 30_000,
  stallAbortMs: 10 * 60_000,
  catchUpBaseMs: 10 * 60_000,
  catchUpFloorBytesPerSec: 1_000_000,
  pollMs: 30_000,
  retryMs: 2_000,
};

/** With patch poll-backs-off, a wait's polls are at most this many times pollMs apart (patches.ts). */
export const POLL_BACKOFF = 4;

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
const { guardedWrite, readMoveContext, readPartition } = proxyActivities<Activities>(ACTIVITY_OPTIONS);

/** What ends a wait early: the step's caller decides what each means. */
export type Interrupt = 'recovery' | 'cancel' | 'node_down' | 'stalled' | 'deadline';

/** One replica as the workflow last heard of it. */
export interface ReplicaKnowledge {
  /** The highest durable offset reported (a read after a refusal may lower it: the broker's word wins). */
  durable: number;
  bytesRemaining: number | null;
  live: boolean;
  admitted: boolean;
}

export class Watch {
  /**
   * What the broker said last: the generation and epoch, a pending recovery, the partition record as last read or
   * returned by a write (null before the first), the highest confirmed tail of any progress read or signal.
   * Written only by the watch's own handlers; the getters below read it.
   */
  private readonly known = { generation: 0, epoch: 0, recoveryPending: false, partition: null as Partition | null, confirmedTail: null as number | null };
  /** The epoch a pending recovery replaces: only an activation past it clears the pending state. */
  private recoveringEpoch = -1;
  /** Bumped by every change: waits re-check their condition when it moves. */
  private version = 0;
  private readonly replicas = new Map<string, ReplicaKnowledge>();
  /** Generation of the add-learner write per node: an `admitted` event older than it is from an earlier learner. */
  private readonly learnerSince = new Map<string, number>();
  /** The newest generation an `admitted` signal carried per node. */
  private readonly admittedAt = new Map<string, number>();
  /** Transfer watches of the learners this operation added, for stalls and the catch-up deadline. */
  private readonly transfers: Transfers;
  /** The latest broker clock reading seen (a read's `now`, a progress event's `at`). */
  private brokerNow = 0;
  /** The progress the last read or write reply returned (never a signal's): what a deadline is fixed from (DEADLINE_AT_START). */
  private lastRead: Progress | null = null;
  private readonly nodeSeq = new Map<string, number>();
  private writeSeq = 0;
  private pollDue = false;
  private pollArmed = false;
  /** Called whenever a wait goes on waiting, with what it waits for (the operation shows it). */
  private blocked: (reason: string) => void = () => undefined;

  /** Patch decide-on-timers: reads are normal activities and time decisions are set by timers. */
  readonly onTimers: boolean;
  private readonly recoveryAtItsEpoch: boolean;
  /** Patch deadline-at-start: the add-learner asks for the progress read its deadline is fixed from. */
  readonly deadlineAtStart: boolean;
  /** Patch admission-kept: ADMITTED_BEFORE_REPLY's rule without asking that patch at the reply. */
  private readonly admissionKept: boolean;
  /** Patch poll-backs-off: each read in one wait doubles the delay to the next poll, up to POLL_BACKOFF times pollMs. */
  private readonly pollBacksOff: boolean;
  /** Patch poll-reads-the-partition: a poll reads the partition, not every node. */
  private readonly pollReadsThePartition: boolean;

  constructor(
    readonly partitionId: string,
    readonly timing: MoveTiming,
    patches: WatchPatches,
    /** The workflow timer (unit tests give a fake one). */
    private readonly timer: (ms: number) => Promise<void> = sleep,
  ) {
    this.onTimers = patches.onTimers;
    this.recoveryAtItsEpoch = patches.recoveryAtItsEpoch;
    this.deadlineAtStart = patches.deadlineAtStart;
    this.admissionKept = patches.admissionKept;
    this.pollBacksOff = patches.pollBacksOff;
    this.pollReadsThePartition = patches.pollReadsThePartition && patches.onTimers;
    this.transfers = new Transfers(timing, { onTimers: this.onTimers, fixedBytes: this.deadlineAtStart }, (ms, fired) => this.after(ms, fired));
  }

  get generation(): number {
    return this.known.generation;
  }

  get epoch(): number {
    return this.known.epoch;
  }

  get recoveryPending(): boolean {
    return this.known.recoveryPending;
  }

  get partition(): Partition | null {
    return this.known.partition;
  }

  get confirmedTail(): number | null {
    return this.known.confirmedTail;
  }

  /** Whoever shows what a wait waits for (the operation). */
  reportBlocked(to: (reason: string) => void): void {
    this.blocked = to;
  }

  /** Something a wait's condition reads changed outside the watch (a timer fired, a cancel came): waits re-check. */
  changed(): void {
    this.version++;
  }

  /** The broker said `node` is up or down (a node signal, a read, a refusal naming it). */
  noteLive(node: string, live: boolean): void {
    this.entry(node).live = live;
  }

  replica(node: string): Readonly<ReplicaKnowledge> {
    return this.entry(node);
  }

  private entry(node: string): ReplicaKnowledge {
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
    setHandler(progressSignal, (p) => this.heardProgress(p));
    setHandler(admittedSignal, (a) => this.heardAdmitted(a));
    setHandler(recoverySignal, (r) => {
      if (r.state === 'opened' && r.epoch >= this.epoch) this.openRecovery(r.epoch);
      if (r.state === 'activated' && r.epoch > this.recoveringEpoch) {
        this.known.recoveryPending = false;
        this.known.epoch = r.epoch;
        this.noteGeneration(r.generation);
      }
      this.version++;
    });
    setHandler(nodeSignal, (n) => {
      if (n.seq !== undefined) {
        if (n.seq < (this.nodeSeq.get(n.node) ?? -1)) return;
        this.nodeSeq.set(n.node, n.seq);
      }
      this.noteLive(n.node, n.live);
      this.version++;
    });
  }

  /** The relay's progress signal. */
  heardProgress(p: ProgressSignal): void {
    this.noteGeneration(p.generation);
    this.known.confirmedTail = Math.max(this.confirmedTail ?? -1, p.confirmedTail);
    // The event's own time; a relay from before `at` existed leaves the latest broker time known.
    const at = this.onTimers ? this.noteBrokerTime(p.at) : legacyNow();
    for (const r of p.replicas) this.noteReplica(r.node, { ...r, stalledSince: r.stalled ? at : null }, at);
    this.version++;
  }

  /** The relay's admission signal: the learner added before its generation is admitted. */
  heardAdmitted(a: AdmittedSignal): void {
    this.noteGeneration(a.generation);
    this.admittedAt.set(a.node, Math.max(a.generation, this.admittedAt.get(a.node) ?? -1));
    if (a.generation > (this.learnerSince.get(a.node) ?? -1)) this.entry(a.node).admitted = true;
    this.version++;
  }

  noteGeneration(g: number | undefined): void {
    if (g !== undefined && g > this.generation) this.known.generation = g;
  }

  /** A recovery of `epoch` (the epoch that failed) is pending, unless an epoch past it is known: then it activated. */
  private openRecovery(epoch: number): void {
    if (this.recoveryAtItsEpoch && epoch < this.epoch) return;
    this.known.recoveryPending = true;
    this.recoveringEpoch = Math.max(this.recoveringEpoch, epoch);
  }

  private noteBrokerTime(at: number | undefined): number {
    if (at !== undefined) this.brokerNow = Math.max(this.brokerNow, at);
    return this.brokerNow;
  }

  /** `at`: the broker's time of the report, or before the patch the workflow clock when it came. */
  private noteReplica(node: string, report: TargetReport & { live?: boolean }, at: number): void {
    const r = this.entry(node);
    if (report.durableOffset > r.durable) {
      r.durable = report.durableOffset;
      r.bytesRemaining = report.bytesRemaining;
    } else if (report.durableOffset === r.durable) {
      r.bytesRemaining = Math.min(r.bytesRemaining ?? report.bytesRemaining, report.bytesRemaining);
    }
    if (report.live !== undefined) r.live = report.live;
    this.transfers.note(node, report, at);
  }

  /** Take in a partition record (from a write reply or a read); a record older than what signals said changes nothing it should not. */
  notePartition(p: Partition): void {
    // An activity result applied after a signal in the same activation may be older: it never takes back what
    // a newer generation or epoch told us.
    const fresh = p.generation >= this.generation;
    this.known.epoch = Math.max(this.epoch, p.epoch);
    this.noteGeneration(p.generation);
    if (p.pendingRecovery) this.openRecovery(p.pendingRecovery.epoch);
    else if (p.epoch > this.recoveringEpoch) this.known.recoveryPending = false;
    for (const node of [p.owner, ...p.followers, ...p.learners, ...(p.leaving ? [p.leaving] : [])]) {
      const admitted = p.history.some((h) => h.node === node && !h.suspended);
      if (fresh || admitted) this.entry(node).admitted = admitted;
    }
    if (fresh) this.known.partition = p;
    this.version++;
  }

  private noteProgress(progress: Progress): void {
    this.lastRead = progress;
    this.known.confirmedTail = Math.max(this.confirmedTail ?? -1, progress.confirmedTail);
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
    for (const n of nodes ?? []) this.noteLive(n.id, n.live);
  }

  /** Read the partition, its progress and the nodes (a local activity) and take them in. */
  async read(): Promise<MoveContext> {
    const ctx = await (this.onTimers ? readMoveContext : readLocally)(this.partitionId);
    this.absorb(ctx.view, ctx.nodes);
    return ctx;
  }

  /** A wait's poll: `read()`, or with patch poll-reads-the-partition the partition alone (its progress says who is live). */
  private async poll(): Promise<void> {
    if (this.pollReadsThePartition) this.absorb(await readPartition(this.partitionId));
    else await this.read();
  }

  /**
   * Re-read T's durable offset from the broker, for when the broker's word must win over the maximum signals
   * reported (a lost disk can lower it).
   */
  async rereadDurable(node: string): Promise<void> {
    const { view } = await this.read();
    this.entry(node).durable = view.progress.replicas.find((x) => x.node === node)?.durableOffset ?? -1;
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
    const sentAtEpoch = this.epoch;
    const request = { ...body, expectedGeneration: this.generation, idempotencyKey: key(name) };
    const then = options.then ? { write: options.then.write, request: { ...options.then.body, idempotencyKey: key(options.then.write) } } : undefined;
    const reply = await guardedWrite.executeWithOptions(
      { ...ACTIVITY_OPTIONS, summary },
      // The activity's generic signature does not survive proxying; the body matches `name`'s schema.
      [this.partitionId, name, request as never, { readProgress: options.readProgress, then }],
    );
    this.noteReply(reply, sentAtEpoch);
    if (reply.then && !('rejected' in reply.then)) this.noteReply(reply.then, sentAtEpoch);
    if (reply.progress) this.noteProgress(reply.progress);
    return reply;
  }

  /**
   * Take in a guarded write's reply: the record it returns, or what its refusal says of the broker. `sentAtEpoch`:
   * the epoch known when the write was sent, the earliest a recovery it was refused for can have failed at.
   */
  noteReply(reply: WriteReply, sentAtEpoch = this.epoch): void {
    if (reply.ok) {
      this.notePartition(reply.partition);
      return;
    }
    const { code, saw } = reply.refusal;
    // The broker's current generation is its word, even below what signals said: a record deleted and created
    // again under the same id starts over, and late events of the old one must not hold the next write forever.
    if (code === 'generation_mismatch' && typeof saw['current'] === 'number') this.known.generation = saw['current'];
    if (code === 'pending_recovery') this.openRecovery(this.recoveryAtItsEpoch ? failedEpoch(saw, sentAtEpoch) : this.epoch);
    if (code === 'node_down' && typeof saw['node'] === 'string') this.noteLive(saw['node'], false);
    this.version++;
  }

  /** A learner was added at this generation: admission events older than it are from an earlier learner. */
  learnerAdded(node: string, generation: number): void {
    this.learnerSince.set(node, generation);
    // An admission newer than the write is this learner's, however early its signal came (ADMISSION_KEPT, and
    // ADMITTED_BEFORE_REPLY for executions from before it).
    const newer = (this.admittedAt.get(node) ?? -1) > generation;
    this.entry(node).admitted = newer && (this.admissionKept || patched(ADMITTED_BEFORE_REPLY));
  }

  /** Start (or restart, for a new attempt) watching the transfer to `node` (transfers.ts). */
  trackTransfer(node: string): void {
    const bytes = this.deadlineAtStart ? this.lastRead?.replicas.find((r) => r.node === node)?.bytesRemaining : this.replica(node).bytesRemaining;
    this.transfers.track(node, this.onTimers ? this.brokerNow : legacyNow(), bytes ?? 0);
  }

  /** The watched transfer to `node`, if any. */
  transfer(node: string): WatchedTransfer | undefined {
    return this.transfers.get(node);
  }

  /** How long the transfer to `node` has made no progress (as of its latest report), for words. */
  stalledFor(node: string): number {
    return this.transfers.stalledFor(node);
  }

  /** The transfer to `node` made no progress for stallAbortMs. */
  stalledTooLong(node: string): boolean {
    return this.transfers.stalledTooLong(node);
  }

  /** The transfer to `node` ran past its catch-up deadline (transfers.ts). */
  pastCatchUpDeadline(node: string): boolean {
    return this.transfers.pastCatchUpDeadline(node);
  }

  /** A workflow timer whose firing changes what the watch knows: waits look again when it fires. */
  after(ms: number, fired: () => void): void {
    void this.timer(Math.max(1, ms)).then(() => {
      fired();
      this.version++;
    });
  }

  /** Wait `retryMs` after a passing refusal, or less if `stop` turns true. */
  async pause(stop: () => boolean = () => false): Promise<void> {
    await condition(stop, this.timing.retryMs);
  }

  /**
   * Wait until `done` or an interrupt, re-reading the broker when the poll timer is due. One poll timer at a
   * time, whatever signals arrive meanwhile: a delayed or dropped event costs at most one poll's delay (pollMs, or
   * with patch poll-backs-off up to POLL_BACKOFF times it in a long wait), and no timer is started per signal or per
   * wait. A caller that re-reads on its own timer (an interrupt) asks for no poll: two read timers in one wait could
   * fire beside a read's result in the first run and apart from it on replay.
   */
  async waitFor<I extends string>(done: () => boolean, interrupts: () => I | null, describe: () => string, poll = true): Promise<I | null> {
    let reads = 0;
    for (;;) {
      if (done()) return null;
      const why = interrupts();
      if (why) return why;
      this.blocked(describe());
      if (poll && this.pollDue) {
        this.pollDue = false;
        reads++;
        await this.poll();
        continue;
      }
      if (poll) this.armPoll(this.pollBacksOff ? Math.min(2 ** reads, POLL_BACKOFF) : 1);
      const seen = this.version;
      await condition(() => this.version !== seen);
    }
  }

  /** Arm the poll timer for `times` pollMs, unless one is armed already. */
  private armPoll(times: number): void {
    if (this.pollArmed) return;
    this.pollArmed = true;
    void sleep(this.timing.pollMs * times).then(() => {
      this.pollArmed = false;
      this.pollDue = true;
      this.version++;
    });
  }
}

/** The epoch a `pending_recovery` refusal says failed (the record's `pendingRecovery.epoch`), or else the one known when it was sent. */
function failedEpoch(saw: Record<string, unknown>, sentAtEpoch: number): number {
  return typeof saw['epoch'] === 'number' ? saw['epoch'] : sentAtEpoch;
}
