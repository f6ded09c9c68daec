/**
 * What a reconfiguration's workflow knows of the broker: the partition's generation and epoch, a pending
 * recovery, each replica's durable offset, transfer progress and liveness, who is admitted, admission and the
 * final boundary. Fed by the signal handlers of definitions.ts, by reads and by the replies of guarded writes;
 * every change bumps `version`, which is what `waitFor` waits on (with one poll timer at a time).
 */
import { condition, proxyActivities, proxyLocalActivities, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities, MoveContext, WriteOutcome } from '../../activities';
import type { GuardedWriteName, Partition, PartitionView, Progress, WriteReply } from '../../cluster/contract';
import { admittedSignal, nodeSignal, progressSignal, recoverySignal, type MoveTiming } from '../definitions';
import { TargetWatch, type TargetReport } from '../follower-move-rules';

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
// A read is a local activity: it runs inside the workflow task, with no extra round trip through the server,
// and reading twice after a crash is harmless.
const { readMoveContext } = proxyLocalActivities<Activities>(ACTIVITY_OPTIONS);
// A guarded write is a normal activity: the server records its input, so every retry sends the same body
// under the same idempotency key and gets the first reply back.
const { guardedWrite } = proxyActivities<Activities>(ACTIVITY_OPTIONS);

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
  generation = 0;
  epoch = 0;
  recoveryPending = false;
  /** The epoch a pending recovery replaces: only an activation past it clears the pending state. */
  private recoveringEpoch = -1;
  /** The partition record as last read or returned by a write (null before the first). */
  partition: Partition | null = null;
  /** The last progress read (tail, confirmed tail) and the confirmed tail of the last progress signal. */
  progress: Progress | null = null;
  confirmedTail: number | null = null;
  /** close-admission's final boundary, while admission is closed by this operation. */
  finalBoundary: number | null = null;
  /** Bumped by every change: waits re-check their condition when it moves. */
  version = 0;
  private readonly replicas = new Map<string, ReplicaKnowledge>();
  /** Generation of the add-learner write per node: an `admitted` event older than it is from an earlier learner. */
  private readonly learnerSince = new Map<string, number>();
  /** Transfer watches of the learners this operation added, for stalls and the catch-up deadline. */
  private readonly transfers = new Map<string, { watch: TargetWatch; startedAt: number; bytesToCopy: number }>();
  private readonly nodeSeq = new Map<string, number>();
  private writeSeq = 0;
  private pollDue = false;
  private pollArmed = false;
  /** Called whenever a wait goes on waiting, with what it waits for (the operation shows it). */
  onBlocked: (reason: string) => void = () => undefined;

  constructor(
    readonly partitionId: string,
    readonly timing: MoveTiming,
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
      for (const r of p.replicas) this.noteReplica(r.node, { ...r, stalledSince: r.stalled ? Date.now() : null });
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

  private noteReplica(node: string, report: TargetReport & { live?: boolean }): void {
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
      t.watch.note(report, Date.now());
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
    this.progress = progress;
    this.confirmedTail = Math.max(this.confirmedTail ?? -1, progress.confirmedTail);
    for (const t of progress.replicas) {
      this.noteReplica(t.node, {
        durableOffset: t.durableOffset,
        bytesRemaining: t.bytesRemaining,
        phase: t.phase,
        // The broker's clock is not the workflow's: carry over how long ago the stall began.
        stalledSince: t.stalledSince === null ? null : Date.now() - Math.max(0, progress.now - t.stalledSince),
        pausedForRecovery: t.pausedForRecovery,
        live: t.live,
      });
    }
  }

  absorb(view: PartitionView, nodes?: MoveContext['nodes']): void {
    this.notePartition(view.partition);
    this.noteProgress(view.progress);
    for (const n of nodes ?? []) this.replica(n.id).live = n.live;
  }

  /** Read the partition, its progress and the nodes (a local activity) and take them in. */
  async read(): Promise<MoveContext> {
    const ctx = await readMoveContext(this.partitionId);
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

  /** Start (or restart, for a new attempt) watching the transfer to `node`: the stall clock and deadline start now. */
  trackTransfer(node: string, durableOnly = false): void {
    const existing = this.transfers.get(node);
    if (existing) {
      existing.watch.restart(Date.now());
      existing.startedAt = Date.now();
      existing.bytesToCopy = this.replica(node).bytesRemaining ?? 0;
      return;
    }
    this.transfers.set(node, { watch: new TargetWatch(durableOnly, Date.now()), startedAt: Date.now(), bytesToCopy: this.replica(node).bytesRemaining ?? 0 });
  }

  /** The watched transfer to `node`, if any. */
  transfer(node: string): { watch: TargetWatch; startedAt: number; bytesToCopy: number } | undefined {
    return this.transfers.get(node);
  }

  /**
   * The catch-up deadline of the transfer to `node`: a base plus the largest transfer it reported at the floor
   * rate (a step's timeout in proportion to the bytes it moves, like PD's), extended by time paused for recovery.
   */
  catchUpDeadline(node: string): number {
    const t = this.transfers.get(node);
    if (!t) return Infinity;
    return t.startedAt + t.watch.pausedFor(Date.now()) + this.timing.catchUpBaseMs + Math.ceil((t.bytesToCopy / this.timing.catchUpFloorBytesPerSec) * 1000);
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
