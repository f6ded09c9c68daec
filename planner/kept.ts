/**
 * The planner's reading of a topology's partition records, kept from one plan to the next by a long-lived caller
 * (the loop's worker). At 100,000 partitions reading every record is most of a tick (30-45 ms, the records' fields
 * scattered over the heap), while one tick's topology differs from the last in a few records: the topology model
 * (cluster/model.ts) keeps every other record as the same object in the same place, so only those are read again.
 */
import type { Partition, Topology } from '../cluster/contract';
import { ClusterState } from './state';
import type { PlannerConfig } from './types';

/** Past this share of records whose copies may have moved, reading all of them again costs less than following each. */
const REREAD_SHARE = 1 / 8;

export class KeptReading {
  private base: ClusterState | null = null;
  private records: Topology['partitions'] = [];
  /** What else the reading depends on: the history weight's half point and the nodes, in order. */
  private key = '';
  private index: Map<string, number> | null = null;
  readonly counts = { whole: 0, followed: 0, recordsReadAgain: 0, figuresReadAgain: 0 };

  /**
   * The reading of `t` to copy from, or null where the state reads `t` itself: while a node is down the copies it
   * lost depend on the clock, not only on the records.
   */
  baseFor(t: Topology, config: PlannerConfig): ClusterState | null {
    if (t.nodes.some((n) => !n.live)) {
      this.base = null;
      return null;
    }
    const key = `${config.historyHalfBytes} ${t.nodes.map((n) => n.id).join(' ')}`;
    const changed = this.base !== null && key === this.key ? this.changedIn(t.partitions) : null;
    if (this.base === null || changed === null) {
      this.base = new ClusterState({ topology: t, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: t.now }, config, new Set());
      this.key = key;
      this.index = null;
      this.counts.whole++;
    } else {
      if (changed.placed.length + changed.figures.length > 0) this.base.reread(t.partitions, changed.placed, config.historyHalfBytes, changed.figures);
      this.counts.followed++;
      this.counts.recordsReadAgain += changed.placed.length;
      this.counts.figuresReadAgain += changed.figures.length;
    }
    this.records = t.partitions;
    return this.base;
  }

  /** The place of partition `id` in the records last read. */
  indexOf(id: string): number | undefined {
    this.index ??= new Map(this.records.map((p, i) => [p.id, i]));
    return this.index.get(id);
  }

  /**
   * Places whose record is another object than the one read: those whose copies may have moved (`placed`), and
   * those whose figures alone did (`figures`); null when too many are `placed` or they are not the same partitions.
   */
  private changedIn(records: Topology['partitions']): { placed: number[]; figures: number[] } | null {
    const placed: number[] = [];
    const figures: number[] = [];
    if (records === this.records) return { placed, figures };
    if (records.length !== this.records.length) return null;
    const most = records.length * REREAD_SHARE;
    for (let p = 0; p < records.length; p++) {
      const was = this.records[p]!;
      const now = records[p]!;
      if (now === was) continue;
      if (now.id !== was.id) return null;
      if (KeptReading.figuresOnly(was, now)) figures.push(p);
      else if (placed.push(p) > most) return null;
    }
    return { placed, figures };
  }

  /**
   * Whether `now` differs from `was` in its advisory figures at most: every other field the planner reads is the same
   * value or the same array. The topology model shares them when its check refreshes only a record's figures
   * (cluster/model.ts, `withFigures`); records parsed apart never share arrays, so they are read again whole.
   */
  static figuresOnly(was: Partition, now: Partition): boolean {
    return (
      now.owner === was.owner &&
      now.followers === was.followers &&
      now.learners === was.learners &&
      now.leaving === was.leaving &&
      now.history === was.history &&
      now.pendingRecovery === was.pendingRecovery &&
      now.kind === was.kind &&
      now.admission === was.admission &&
      now.replicationFactor === was.replicationFactor &&
      now.retainedCopies.length === 0 &&
      was.retainedCopies.length === 0
    );
  }
}
