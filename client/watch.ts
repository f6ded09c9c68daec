/**
 * `rebalancer moves --watch`: a live view of the running reconfigurations until stopped (Ctrl-C). On a terminal,
 * one progress bar of bytes per move, redrawn in place; otherwise a plain line whenever a move's line changes, so
 * the output reads well in a log file or a pipe.
 */
import { MultiBar, type SingleBar } from 'cli-progress';
import type { MoveStatus } from '../rules/definitions';
import { moveLabel, progressLine } from './output';

export interface WatchOptions {
  everyMs: number;
  /** Ends the watch. */
  signal: AbortSignal;
  /** The terminal to draw bars on; plain lines go to `out` without one. */
  terminal?: NodeJS.WriteStream;
  out: (text: string) => void;
  /** One JSON object `{ running }` per refresh instead of lines. */
  json?: boolean;
}

/** The bytes a move has copied out of the most it had left to copy (the first figure seen is the total). */
class Totals {
  private readonly most = new Map<string, number>();
  progress(s: MoveStatus): { total: number; copied: number } {
    // Before T is a learner nothing is known; once past catching up, everything is copied.
    if (s.bytesRemaining === null) return s.phase === 'validating' || s.phase === 'adding_learner' ? { total: 1, copied: 0 } : { total: 1, copied: 1 };
    const total = Math.max(this.most.get(s.partition) ?? 0, s.bytesRemaining, 1);
    this.most.set(s.partition, total);
    return { total, copied: total - s.bytesRemaining };
  }
  forget(partition: string): void {
    this.most.delete(partition);
  }
}

/** The plain line of one running move. */
export function watchLine(s: MoveStatus, progress: { total: number; copied: number }): string {
  return `${s.partition} ${s.kind} ${moveLabel(s.from, s.to)} ${Math.floor((100 * progress.copied) / progress.total)}% ${progressLine(s)}`;
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}

export async function watchMoves(list: () => Promise<MoveStatus[]>, opts: WatchOptions): Promise<void> {
  const totals = new Totals();
  const view = opts.json ? jsonView(opts.out) : opts.terminal ? barView(opts.terminal) : lineView(opts.out);
  try {
    while (!opts.signal.aborted) {
      const running = await list();
      if (opts.signal.aborted) break;
      view.show(running, totals);
      await pause(opts.everyMs, opts.signal);
    }
  } finally {
    view.stop();
  }
}

interface View {
  show(running: MoveStatus[], totals: Totals): void;
  stop(): void;
}

function jsonView(out: (text: string) => void): View {
  return { show: (running) => out(JSON.stringify({ running }) + '\n'), stop() {} };
}

function lineView(out: (text: string) => void): View {
  const last = new Map<string, string>();
  let empty = false;
  return {
    show(running, totals) {
      const now = new Set(running.map((s) => s.partition));
      for (const partition of [...last.keys()].filter((p) => !now.has(p))) {
        out(`${partition} ended: \`rebalancer show ${partition}\` says how\n`);
        last.delete(partition);
        totals.forget(partition);
      }
      for (const s of running) {
        const line = watchLine(s, totals.progress(s));
        if (last.get(s.partition) !== line) out(line + '\n');
        last.set(s.partition, line);
      }
      if (running.length === 0 && !empty) out('no moves in progress\n');
      empty = running.length === 0;
    },
    stop() {},
  };
}

function barView(terminal: NodeJS.WriteStream): View {
  const multi = new MultiBar({
    stream: terminal,
    format: '{partition} {move} [{bar}] {percentage}% {detail}',
    barsize: 30,
    hideCursor: true,
    clearOnComplete: false,
    autopadding: true,
  });
  const bars = new Map<string, SingleBar>();
  const idle = multi.create(0, 0, { partition: 'no moves in progress', move: '', detail: '' }, { format: '{partition}' });
  return {
    show(running, totals) {
      const now = new Set(running.map((s) => s.partition));
      for (const [partition, bar] of bars) {
        if (now.has(partition)) continue;
        multi.remove(bar);
        bars.delete(partition);
        totals.forget(partition);
      }
      const width = Math.max(0, ...running.map((s) => s.partition.length));
      const moveWidth = Math.max(0, ...running.map((s) => `${s.kind} ${moveLabel(s.from, s.to)}`.length));
      for (const s of running) {
        const { total, copied } = totals.progress(s);
        const payload = { partition: s.partition.padEnd(width), move: `${s.kind} ${moveLabel(s.from, s.to)}`.padEnd(moveWidth), detail: progressLine(s) };
        const bar = bars.get(s.partition) ?? multi.create(total, copied, payload);
        bars.set(s.partition, bar);
        bar.setTotal(total);
        bar.update(copied, payload);
      }
      idle.update(0, { partition: running.length === 0 ? 'no moves in progress' : `${running.length} in progress (Ctrl-C to stop)` });
      multi.update();
    },
    stop: () => multi.stop(),
  };
}
