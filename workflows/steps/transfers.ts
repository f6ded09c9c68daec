/**
 * The transfers to the learners an operation added, and the two time decisions on each: the stall abort (no
 * progress for stallAbortMs) and the catch-up deadline (a base plus the bytes to copy at a floor rate, like PD's
 * step timeout in proportion to the bytes it moves). Since patch decide-on-timers both are set by workflow
 * timers, whose firing is in history, never by comparing clocks after a read (the rule: step.ts); before it,
 * by the workflow clock.
 */
import type { MoveTiming } from '../../rules/definitions';
import { TargetWatch, type TargetReport } from '../../rules/follower-move-rules';
import { legacyNow } from './legacy-clock';

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

export class Transfers {
  private readonly byNode = new Map<string, WatchedTransfer>();

  private readonly onTimers: boolean;
  private readonly fixedBytes: boolean;

  constructor(
    private readonly timing: MoveTiming,
    /**
     * onTimers: patch decide-on-timers, the decisions are set by timers. fixedBytes: patch deadline-at-start, the
     * bytes to copy are those known when the attempt starts, never raised by a later report.
     */
    patches: { onTimers: boolean; fixedBytes: boolean },
    /** A workflow timer whose firing wakes the operation's waits (Watch.after). */
    private readonly after: (ms: number, fired: () => void) => void,
  ) {
    this.onTimers = patches.onTimers;
    this.fixedBytes = patches.fixedBytes;
  }

  get(node: string): WatchedTransfer | undefined {
    return this.byNode.get(node);
  }

  /** Start (or restart, for a new attempt) watching the transfer to `node`: the stall clock and the deadline start at `now`. */
  track(node: string, now: number, bytesToCopy: number): void {
    let t = this.byNode.get(node);
    if (t) {
      t.watch.restart(now);
      Object.assign(t, { startedAt: now, bytesToCopy, attempt: t.attempt + 1, stallArmed: false, stallExpired: false, deadlineRan: 0, deadlineExpired: false });
    } else {
      t = { watch: new TargetWatch(false, now), startedAt: now, bytesToCopy, attempt: 0, stallArmed: false, stallExpired: false, deadlineRan: 0, deadlineExpired: false };
      this.byNode.set(node, t);
    }
    if (!this.onTimers) return;
    this.armStall(t);
    this.armDeadline(t);
  }

  /** A progress report for `node` at `at` (the broker's time; before the patch, the workflow clock). */
  note(node: string, report: TargetReport, at: number): void {
    const t = this.byNode.get(node);
    if (!t) return;
    if (!this.fixedBytes) t.bytesToCopy = Math.max(t.bytesToCopy, report.bytesRemaining);
    t.watch.note(report, at);
    if (this.onTimers) this.armStall(t);
  }

  /** How long the transfer to `node` has made no progress (as of its latest report), for words. */
  stalledFor(node: string): number {
    const t = this.byNode.get(node);
    if (!t) return 0;
    return t.watch.stalledFor(this.onTimers ? t.watch.lastSeen : legacyNow());
  }

  /** The transfer to `node` made no progress for stallAbortMs. */
  stalledTooLong(node: string): boolean {
    const t = this.byNode.get(node);
    if (!t) return false;
    return this.onTimers ? t.stallExpired : t.watch.stalledFor(legacyNow()) >= this.timing.stallAbortMs;
  }

  /** The transfer to `node` ran past its catch-up deadline, extended by time paused for recovery. */
  pastCatchUpDeadline(node: string): boolean {
    const t = this.byNode.get(node);
    if (!t) return false;
    if (this.onTimers) return t.deadlineExpired;
    return legacyNow() >= t.startedAt + t.watch.pausedFor(legacyNow()) + this.allowedBeforePause(t);
  }

  private allowedBeforePause(t: WatchedTransfer): number {
    return this.timing.catchUpBaseMs + Math.ceil((t.bytesToCopy / this.timing.catchUpFloorBytesPerSec) * 1000);
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
   * time allowed grew meanwhile (time paused for recovery; before patch deadline-at-start, more bytes reported too),
   * armed again for the rest. While the transfer is paused it never expires.
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
}
