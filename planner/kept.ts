/**
 * The planner's reading of a topology's partition records, kept from one plan to the next by a long-lived caller
 * (the loop's worker). At 100,000 partitions reading every record is most of a tick (30-45 ms, the records' fields
 * scattered over the heap), while one tick's topology differs from the last in a few records: the topology model
 * (cluster/model.ts) keeps every other record as the same object in the same place, so only those are read again.
 */
import type { Topology } from '../cluster/contract';
import { ClusterState } from './state';
import type { PlannerConfig } from './types';

/** Past this share of records changed, reading all of them again costs less than following each. */
const REREAD_SHARE = 1 / 8;

export class KeptReading {
  private base: ClusterState | null = null;
  private records: Topology['partitions'] = [];
  /** What else the reading depends on: the history weight's half point and the nodes, in order. */
  private key = '';
  private index: Map<string, number> | null = null;
  readonly counts = { whole: 0, followed: 0, recordsReadAgain: 0 };

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
      if (changed.length > 0) this.base.reread(t.partitions, changed, config.historyHalfBytes);
      this.counts.followed++;
      this.counts.recordsReadAgain += changed.length;
    }
    this.records = t.partitions;
    return this.base;
  }

  /** The place of partition `id` in the records last read. */
  indexOf(id: string): number | undefined {
    this.index ??= new Map(this.records.map((p, i) => [p.id, i]));
    return this.index.get(id);
  }

  /** Places whose record is another object than the one read, or null when they are too many or not the same partitions. */
  private changedIn(records: Topology['partitions']): number[] | null {
    if (records === this.records) return [];
    if (records.length !== this.records.length) return null;
    const changed: number[] = [];
    const most = records.length * REREAD_SHARE;
    for (let p = 0; p < records.length; p++) {
      if (records[p] === this.records[p]) continue;
      if (records[p]!.id !== this.records[p]!.id || changed.length >= most) return null;
      changed.push(p);
    }
    return changed;
  }
}
