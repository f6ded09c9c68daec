/**
 * The last hour of the cluster as the admin service saw it, for the dashboard's charts: sampled every few seconds
 * whether or not anyone watches, kept in SQLite (the audit log's file in the data directory) so a restart of the
 * service keeps it, and pruned to an hour.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { ClusterEvent, Topology, Transfer } from '../cluster/contract';
import type { NodeScore } from '../planner/types';
import type { MoveStatus } from '../rules/definitions';
import { withTransferBytes, type ScoresView } from '../operations/scores';
import type { AdminDeps, EndedRun } from './deps';

export const HISTORY_MS = 3_600_000;
export const DIMENSIONS = ['owned', 'followed', 'history', 'traffic', 'sync'] as const;
export type Dimension = (typeof DIMENSIONS)[number];

export interface ClusterSample {
  /** Epoch ms. */
  at: number;
  spread: number;
  mean: number;
  /** Half the band's width: nodes beyond mean ± threshold shed or receive. */
  threshold: number;
  /** Per score dimension, the node furthest from that dimension's mean and by how much (signed); null with no node. */
  worst: Record<Dimension, { node: string; deviation: number } | null>;
  /** Bytes the broker's transfers copied per second since the previous sample. */
  bytesPerSec: number;
  running: number;
  recoveryPending: number;
}

export type NodeSample = Pick<NodeScore, 'node' | 'total' | Dimension>;

/** A node's score at one sample, with the cluster's mean and threshold then (its band). */
export type NodePoint = Omit<NodeSample, 'node'> & { at: number; mean: number; threshold: number };

/** A move as the dashboard shows it: the bytes it copies in all and has copied, as far as this service has seen. */
export type MoveProgress = MoveStatus & { bytesTotal: number | null; bytesCopied: number | null };

export class HistoryStore {
  private readonly db: Database.Database;
  /** A move's peak, read and written for every move a page shows and every move in progress at each sample. */
  private readonly peakRead: Database.Statement<[string], { bytes: number }>;
  private readonly peakWrite: Database.Statement<[string, number]>;

  /** `file` null keeps it in memory; `now` is the clock samples are pruned by (a test's own). */
  constructor(
    file: string | null,
    private readonly now: () => number = Date.now,
  ) {
    if (file) fs.mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file ?? ':memory:');
    this.db.pragma('journal_mode = WAL');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS history_sample (at INTEGER PRIMARY KEY, data TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS history_node (
        node TEXT NOT NULL, at INTEGER NOT NULL, total REAL NOT NULL, owned REAL NOT NULL, followed REAL NOT NULL,
        history REAL NOT NULL, traffic REAL NOT NULL, sync REAL NOT NULL, PRIMARY KEY (node, at));
      CREATE INDEX IF NOT EXISTS history_node_at ON history_node (at);
      CREATE TABLE IF NOT EXISTS history_ended (
        run_id TEXT PRIMARY KEY, workflow_id TEXT NOT NULL, partition TEXT NOT NULL, kind TEXT, from_node TEXT,
        to_node TEXT, closed_at INTEGER NOT NULL, outcome TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS move_peak (move TEXT PRIMARY KEY, bytes INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS history_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);`);
    this.peakRead = this.db.prepare('SELECT bytes FROM move_peak WHERE move = ?');
    this.peakWrite = this.db.prepare('INSERT OR REPLACE INTO move_peak (move, bytes) VALUES (?, ?)');
  }

  /** Where reading the broker's event feed goes on from (0 before the first read). */
  feedCursor(): number {
    return this.db.prepare<[], { value: number }>("SELECT value FROM history_meta WHERE key = 'feed_cursor'").get()?.value ?? 0;
  }

  setFeedCursor(cursor: number): void {
    this.db.prepare("INSERT OR REPLACE INTO history_meta (key, value) VALUES ('feed_cursor', ?)").run(cursor);
  }

  /** One sample and the nodes' scores at it; drops what is older than an hour. */
  record(sample: ClusterSample, nodes: NodeSample[]): void {
    const insertNode = this.db.prepare('INSERT OR REPLACE INTO history_node (node, at, total, owned, followed, history, traffic, sync) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
    this.db.transaction(() => {
      this.db.prepare('INSERT OR REPLACE INTO history_sample (at, data) VALUES (?, ?)').run(sample.at, JSON.stringify(sample));
      for (const n of nodes) insertNode.run(n.node, sample.at, n.total, n.owned, n.followed, n.history, n.traffic, n.sync);
      this.prune();
    })();
  }

  private prune(): void {
    const oldest = this.now() - HISTORY_MS;
    this.db.prepare('DELETE FROM history_sample WHERE at < ?').run(oldest);
    this.db.prepare('DELETE FROM history_node WHERE at < ?').run(oldest);
    this.db.prepare('DELETE FROM history_ended WHERE closed_at < ?').run(oldest);
  }

  /** Samples since `since` (epoch ms), oldest first. */
  samples(since: number): ClusterSample[] {
    return this.db
      .prepare<[number], { data: string }>('SELECT data FROM history_sample WHERE at >= ? ORDER BY at')
      .all(since)
      .map((r) => JSON.parse(r.data) as ClusterSample);
  }

  nodePoints(node: string, since: number): NodePoint[] {
    return this.db
      .prepare<[string, number], Omit<NodePoint, 'mean' | 'threshold'> & { data: string }>(
        `SELECT n.at, n.total, n.owned, n.followed, n.history, n.traffic, n.sync, s.data FROM history_node n
         JOIN history_sample s ON s.at = n.at WHERE n.node = ? AND n.at >= ? ORDER BY n.at`,
      )
      .all(node, since)
      .map(({ data, ...point }) => {
        const { mean, threshold } = JSON.parse(data) as ClusterSample;
        return { ...point, mean, threshold };
      });
  }

  knowsRun(runId: string): boolean {
    return this.db.prepare('SELECT 1 FROM history_ended WHERE run_id = ?').get(runId) !== undefined;
  }

  /** Ended moves; each run once, however often it is reported. */
  recordEnded(runs: EndedRun[]): void {
    const insert = this.db.prepare('INSERT OR IGNORE INTO history_ended (run_id, workflow_id, partition, kind, from_node, to_node, closed_at, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
    this.db.transaction(() => {
      for (const r of runs) insert.run(r.runId, r.workflowId, r.partition, r.kind, r.from, r.to, r.closedAt, r.outcome);
    })();
  }

  /** Moves that ended since `since`, oldest first; with `node`, only those from or to it. */
  ended(since: number, node?: string): EndedRun[] {
    const rows = this.db
      .prepare<[number, string | null, string | null, string | null], { run_id: string; workflow_id: string; partition: string; kind: string | null; from_node: string | null; to_node: string | null; closed_at: number; outcome: string }>(
        'SELECT * FROM history_ended WHERE closed_at >= ? AND (? IS NULL OR from_node = ? OR to_node = ?) ORDER BY closed_at',
      )
      .all(since, node ?? null, node ?? null, node ?? null);
    return rows.map((r) => ({ runId: r.run_id, workflowId: r.workflow_id, partition: r.partition, kind: r.kind as EndedRun['kind'], from: r.from_node, to: r.to_node, closedAt: r.closed_at, outcome: r.outcome }));
  }

  /**
   * Each running move with the bytes it copies in all: the most it was ever seen to have left, by the workflow or
   * by the broker's transfer to its target (`transfers`: the most each transfer, `partition node`, had left, from
   * the broker's progress events, which are ahead of the workflow's reports). Remembered here, so a move that
   * began before a restart still shows what it copied; forgotten by `keepOnly` once the move no longer runs.
   */
  progress(running: readonly MoveStatus[], transfers: ReadonlyMap<string, number>): MoveProgress[] {
    return this.db.transaction(() =>
      running.map((m) => {
        const peak = this.notePeak(m, transfers, m.bytesRemaining ?? 0);
        if (m.bytesRemaining === null) return { ...m, bytesTotal: null, bytesCopied: null };
        return { ...m, bytesTotal: peak, bytesCopied: peak - m.bytesRemaining };
      }),
    )();
  }

  /** Notes the broker's peak of each move in progress and forgets every other move's (those that no longer run). */
  keepOnly(running: readonly MovePeakKey[], transfers: ReadonlyMap<string, number>): void {
    this.db.transaction(() => {
      for (const m of running) this.notePeak(m, transfers, 0);
      const keys = running.map(peakKey);
      this.db.prepare(`DELETE FROM move_peak WHERE move NOT IN (${keys.map(() => '?').join(',')})`).run(...keys);
    })();
  }

  /** The move's peak, raised to what the broker's transfer or the workflow (`reported`) says it had left. */
  private notePeak(m: MovePeakKey, transfers: ReadonlyMap<string, number>, reported: number): number {
    const key = peakKey(m);
    const known = this.peakRead.get(key)?.bytes ?? 0;
    const peak = Math.max(known, transfers.get(`${m.partition} ${m.to}`) ?? 0, reported);
    if (peak > known) this.peakWrite.run(key, peak);
    return peak;
  }

  close(): void {
    this.db.close();
  }
}

/** What names a move's peak: one move of a partition, of its kind, between its nodes. */
type MovePeakKey = Pick<MoveStatus, 'partition' | 'kind' | 'from' | 'to'>;
const peakKey = (m: MovePeakKey) => `${m.partition} ${m.kind} ${m.from ?? '+'}>${m.to}`;

/** Per dimension, the live node (not draining) furthest from the dimension's mean over those nodes. */
export function worstByDimension(nodes: NodeScore[]): ClusterSample['worst'] {
  const counted = nodes.filter((n) => n.live && !n.draining);
  const worst = {} as ClusterSample['worst'];
  for (const d of DIMENSIONS) {
    const mean = counted.reduce((s, n) => s + n[d], 0) / Math.max(1, counted.length);
    let best: { node: string; deviation: number } | null = null;
    for (const n of counted) if (!best || Math.abs(n[d] - mean) > Math.abs(best.deviation)) best = { node: n.node, deviation: n[d] - mean };
    worst[d] = best;
  }
  return worst;
}

/**
 * The most each transfer (`partition node`) had left, taken in from the broker's progress events in feed order: a
 * report of nothing left (caught up) ends the transfer, so the next one to that node starts its count anew.
 */
export function notePeaks(peaks: Map<string, number>, events: ClusterEvent[]): void {
  for (const e of events) {
    if (e.type !== 'progress') continue;
    for (const r of e.replicas) {
      const key = `${e.partition} ${r.node}`;
      if (r.bytesRemaining === 0) peaks.delete(key);
      else peaks.set(key, Math.max(peaks.get(key) ?? 0, r.bytesRemaining));
    }
  }
}

/**
 * Bytes the broker's transfers copied between two looks: what each seen before has less left; all that was left
 * of one that ended with its node still holding the copy (caught up; a learner until its move swaps); and of one
 * begun since, what it had at most (`peaks`, from the feed) less what it has left. One that ended otherwise
 * (cancelled, node lost) copied nothing that stays.
 */
export function bytesCopied(before: Map<string, number>, transfers: Transfer[], topology: Topology, peaks: ReadonlyMap<string, number>): number {
  let copied = 0;
  const now = new Map<string, number>();
  for (const t of transfers) {
    const key = `${t.partition} ${t.node}`;
    now.set(key, t.bytesRemaining);
    if (!before.has(key)) copied += Math.max(0, (peaks.get(key) ?? t.bytesRemaining) - t.bytesRemaining);
  }
  for (const [key, left] of before) {
    const still = now.get(key);
    if (still !== undefined) {
      copied += Math.max(0, left - still);
      continue;
    }
    const [partition, node] = key.split(' ') as [string, string];
    const p = topology.partitions.find((x) => x.id === partition);
    if (p && [p.owner, ...p.followers, ...p.learners].includes(node)) copied += left;
  }
  return copied;
}

const FEED_PAGE = 10_000;
const FEED_PAUSE_MS = 1_000;

export interface Sampler {
  /** Why the last sample failed (the broker or Temporal did not answer), null when it did not. */
  lastError(): string | null;
  /** The running moves with their bytes copied, as far as the broker's feed has been read (a second behind at most, once caught up). */
  progress(running: readonly MoveStatus[]): MoveProgress[];
  /** Resolves once a sample under way has ended, so the store can be closed after. */
  stop(): Promise<void>;
}

/**
 * Samples every `intervalMs`: scores, transfers, moves, recoveries, and the moves that ended since the last look
 * (each run's outcome read once). One sample at a time; a failed one is skipped and said in `lastError`.
 */
export function startSampler(options: {
  deps: AdminDeps;
  store: HistoryStore;
  intervalMs: number;
}): Sampler {
  const { deps, store } = options;
  let previous: { at: number; transfers: Map<string, number> } | null = null;
  // After a start, look back the whole hour for moves that ended while the service was down.
  let endedSince = Date.now() - HISTORY_MS;
  let error: string | null = null;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let current: Promise<void> = Promise.resolve();
  const peaks = new Map<string, number>();
  let feedError: string | null = null;
  let feedTimer: NodeJS.Timeout | undefined;
  let wake: () => void = () => undefined;
  /**
   * The broker's feed, followed in the background: page after page while behind, then once a second. Neither a
   * sample nor a read of moves waits on it, so catching up on a long feed after a start holds up neither.
   */
  const follow = async () => {
    while (!stopped) {
      let behind = false;
      try {
        const page = await deps.events(store.feedCursor(), FEED_PAGE);
        notePeaks(peaks, page.events);
        store.setFeedCursor(page.cursor);
        behind = page.events.length === FEED_PAGE;
        feedError = null;
      } catch (err) {
        feedError = `reading the broker's event feed: ${(err as Error).message}`;
      }
      if (!behind && !stopped) {
        await new Promise<void>((resolve) => {
          wake = resolve;
          feedTimer = setTimeout(resolve, FEED_PAUSE_MS);
        });
      }
    }
  };

  const sample = async () => {
    const at = Date.now();
    // Its own read of the moves, not the API's one-second cache: a sample must not hand a scrape a list a second old.
    const [topology, budget, running] = await Promise.all([deps.topology(), deps.syncBudget(), deps.moves()]);
    const view: ScoresView = deps.scores(topology, withTransferBytes(running, budget.transfers));
    store.keepOnly(running, peaks);
    const copied = previous ? bytesCopied(previous.transfers, budget.transfers, topology, peaks) : 0;
    const seconds = previous ? (at - previous.at) / 1000 : 0;
    store.record(
      {
        at,
        spread: view.spread,
        mean: view.mean,
        threshold: view.upper - view.mean,
        worst: worstByDimension(view.nodes),
        bytesPerSec: seconds > 0 ? copied / seconds : 0,
        running: running.length,
        recoveryPending: topology.partitions.filter((p) => p.pendingRecovery).length,
      },
      view.nodes.map(({ node, total, owned, followed, history, traffic, sync }) => ({ node, total, owned, followed, history, traffic, sync })),
    );
    previous = { at, transfers: new Map(budget.transfers.map((t) => [`${t.partition} ${t.node}`, t.bytesRemaining])) };
    // Visibility may list a closed run a little late: look back a minute past the last look.
    store.recordEnded(await deps.endedMoves(new Date(endedSince - 60_000), (runId) => store.knowsRun(runId)));
    endedSince = at;
  };
  const loop = async () => {
    try {
      await sample();
      error = null;
    } catch (err) {
      error = (err as Error).message;
    }
    if (!stopped) timer = setTimeout(() => (current = loop()), options.intervalMs);
  };
  current = loop();
  const following = follow();
  return {
    lastError: () => error ?? feedError,
    progress: (running) => store.progress(running, peaks),
    async stop() {
      stopped = true;
      clearTimeout(timer);
      clearTimeout(feedTimer);
      wake();
      await Promise.all([current, following]);
    },
  };
}
