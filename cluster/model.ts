/**
 * The topology kept current from the broker's changes read (GET /v1/topology/changes) instead of read whole each
 * time: at 100,000 partitions the whole topology is about 60 MB and takes over a second to serve, parse and check,
 * while a tick's changes are a few records. The whole topology is read at the start, when the broker cannot list
 * the changes (410: it restarted), and every `fullEveryMs` as a check beside the reads (they go on from the model
 * while it runs): records the changes read left different from a whole read are drift, logged and counted, and the
 * whole read replaces the model. Records that did not
 * change keep the advisory figures (history bytes, rates) of the last read that brought them, at most
 * `fullEveryMs` old: they move slowly, and the planner's cooldowns are longer.
 */
import { ClusterHttpError, type ClusterClient } from './client';
import type { Partition, Topology, TopologyChanges } from './contract';

export interface ModelStats {
  fullReads: number;
  changesReads: number;
  /** Reads that asked for changes and read whole instead: the broker could not list them (410), or does not offer the read (404, once). */
  fallbacks: number;
  /** Records a whole read found different from the model (assignment fields, not advisory figures). */
  drifts: number;
}

export interface ModelOptions {
  /** How often a whole read checks the model; 0 reads the whole topology every time. */
  fullEveryMs?: number;
  now?: () => number;
  log?: {
    debug(obj: object, msg: string): void;
    info(obj: object, msg: string): void;
    warn(obj: object, msg: string): void;
  };
}

/**
 * A minute: advisory figures of partitions no change listed stay at most this old, and a drift lives at most this
 * long. At 100,000 partitions a whole read costs about 1.2 s of the worker's time, 2% of a core at this period.
 */
export const DEFAULT_FULL_EVERY_MS = 60_000;

/** What a write decides in a partition record: the record without the advisory figures time alone moves. */
export type SettledRecord = Omit<Partition, 'historyBytes' | 'publishRate' | 'deliveryRate' | 'retainedCopies'> & {
  retainedCopies: Omit<Partition['retainedCopies'][number], 'bytesToCatchUp'>[];
};

export function settledRecord(p: Partition): SettledRecord {
  const { historyBytes: _h, publishRate: _p, deliveryRate: _d, retainedCopies, ...rest } = p;
  return { ...rest, retainedCopies: retainedCopies.map(({ bytesToCatchUp: _b, ...c }) => c) };
}

/** The fields the changes read must keep current, comparable as a string. */
export function assignmentOf(p: Partition): string {
  return JSON.stringify(settledRecord(p));
}

/**
 * The topology at `changes.generation`: every node from the changes, changed records replaced, new ones appended,
 * deleted ones dropped (a record the changes carry exists now, even if an earlier one of its id was deleted).
 * `changes` may start before `topology`'s generation: its records are newer than any the topology holds.
 */
export function applyChanges(topology: Topology, changes: TopologyChanges): Topology {
  const head = { contractVersion: changes.contractVersion, generation: changes.generation, now: changes.now, nodes: changes.nodes };
  // The common tick at size: nothing or a few records changed, none created or deleted. The order stays, so the
  // index of the records by id serves the next topology too.
  const index = indexOf(topology.partitions);
  if (changes.removed.length === 0 && changes.partitions.every((p) => index.has(p.id))) {
    if (changes.partitions.length === 0) return { ...head, partitions: topology.partitions };
    const partitions = topology.partitions.slice();
    for (const p of changes.partitions) partitions[index.get(p.id)!] = p;
    indexes.set(partitions, index);
    return { ...head, partitions };
  }
  const changed = new Map(changes.partitions.map((p) => [p.id, p]));
  const removed = new Set(changes.removed);
  const partitions: Partition[] = [];
  for (const p of topology.partitions) {
    const next = changed.get(p.id);
    if (next) {
      partitions.push(next);
      changed.delete(p.id);
    } else if (!removed.has(p.id)) partitions.push(p);
  }
  for (const p of changed.values()) partitions.push(p);
  return { ...head, partitions };
}

/** Each partition list's position by id, built once per list a whole read or a creation or deletion made. */
const indexes = new WeakMap<readonly Partition[], Map<string, number>>();

function indexOf(partitions: readonly Partition[]): Map<string, number> {
  let index = indexes.get(partitions);
  if (index === undefined) {
    index = new Map(partitions.map((p, i) => [p.id, i]));
    indexes.set(partitions, index);
  }
  return index;
}

/** Ids of the records in `model` and `fresh` whose assignment differs, leaving out those in `skip`. */
export function driftBetween(model: Topology, fresh: Topology, skip: ReadonlySet<string>): string[] {
  const mine = new Map(model.partitions.map((p) => [p.id, p]));
  const drifted: string[] = [];
  for (const p of fresh.partitions) {
    if (skip.has(p.id)) continue;
    const m = mine.get(p.id);
    mine.delete(p.id);
    if (m === undefined || assignmentOf(m) !== assignmentOf(p)) drifted.push(p.id);
  }
  for (const id of mine.keys()) if (!skip.has(id)) drifted.push(id);
  return drifted;
}

export class TopologyModel {
  private topology: Topology | null = null;
  private fullAt = 0;
  /** False once the broker answered 404: it does not offer the changes read, so every read is whole. */
  private offered = true;
  private queue: Promise<unknown> = Promise.resolve();
  /** The whole read that checks the model, while it runs: reads go on from the model meanwhile. */
  private checking: Promise<void> | null = null;
  private readonly stats: ModelStats = { fullReads: 0, changesReads: 0, fallbacks: 0, drifts: 0 };
  private readonly fullEveryMs: number;
  private readonly now: () => number;

  constructor(
    private readonly client: Pick<ClusterClient, 'topology' | 'topologyChanges'>,
    private readonly options: ModelOptions = {},
  ) {
    this.fullEveryMs = options.fullEveryMs ?? DEFAULT_FULL_EVERY_MS;
    this.now = options.now ?? Date.now;
  }

  /** The topology as of now: reads run one after another, so each sees every change made before it was asked. */
  read(): Promise<Topology> {
    const next = this.queue.then(() => this.readNow());
    this.queue = next.catch(() => undefined);
    return next;
  }

  counts(): ModelStats {
    return { ...this.stats };
  }

  /** Settles once the check running now (if any) has replaced the model: for a caller that must see its result. */
  async checked(): Promise<void> {
    await this.checking;
    await this.queue;
  }

  private async readNow(): Promise<Topology> {
    const held = this.topology;
    if (held === null || !this.offered || this.fullEveryMs === 0) return this.adopt(await this.full(null));
    if (this.now() - this.fullAt >= this.fullEveryMs && this.checking === null) this.check(held);
    const started = performance.now();
    const changes = await this.changes(held.generation);
    if (changes === null) {
      this.stats.fallbacks++;
      return this.adopt(await this.full(null));
    }
    this.topology = applyChanges(held, changes);
    this.stats.changesReads++;
    this.options.log?.debug({ read: 'changes', ms: Math.round(performance.now() - started), changed: changes.partitions.length + changes.removed.length, generation: changes.generation }, 'topology read');
    return this.topology;
  }

  /**
   * The periodic check, beside the reads: at 100,000 partitions the whole read takes seconds, which neither the loop's
   * tick nor a page should wait for. Its result replaces the model between two reads, brought up to the newest
   * generation by the changes after its own.
   */
  private check(held: Topology): void {
    this.fullAt = this.now();
    this.checking = this.full(held)
      .then((whole) => {
        const adopted = this.queue.then(async () => {
          const current = this.topology!;
          if (current.generation === whole.generation) return this.adopt(whole);
          const since = await this.changes(whole.generation);
          // The broker cannot say what changed since: keep the model, and the next read falls back to a whole one.
          return since === null ? current : this.adopt(applyChanges(whole, since));
        });
        this.queue = adopted.catch(() => undefined);
      })
      .catch((err: unknown) => this.options.log?.warn({ err }, 'the whole read that checks the topology model failed; it is tried again at the next period'))
      .finally(() => {
        this.checking = null;
      });
  }

  private adopt(topology: Topology): Topology {
    this.topology = topology;
    this.fullAt = this.now();
    return topology;
  }

  /**
   * A whole read. With a model to check: the model brought up to date first, then the whole read, then the changes
   * since the model's generation, which bring the whole read up to date too. Records those changes carry may
   * differ from the model for good reason (they changed while the whole read was made); any other record that
   * differs is drift.
   */
  private async full(held: Topology | null): Promise<Topology> {
    const started = performance.now();
    const before = held === null ? null : await this.changes(held.generation);
    const model = held !== null && before !== null ? applyChanges(held, before) : null;
    const fresh = await this.client.topology();
    const after = model === null ? null : await this.changes(model.generation);
    let topology = fresh;
    if (model !== null && after !== null) {
      const moved = new Set([...after.partitions.map((p) => p.id), ...after.removed]);
      const drifted = driftBetween(model, fresh, moved);
      if (drifted.length > 0) {
        this.stats.drifts += drifted.length;
        this.options.log?.warn(
          { drifted: drifted.length, partitions: drifted.slice(0, 10), driftsTotal: this.stats.drifts },
          `the changes read left ${drifted.length} partition record(s) different from a whole read of the topology; the whole read replaces them`,
        );
      }
      topology = applyChanges(fresh, after);
    }
    this.stats.fullReads++;
    this.options.log?.debug({ read: 'whole', ms: Math.round(performance.now() - started), checked: model !== null, generation: topology.generation }, 'topology read');
    return topology;
  }

  /** The changes after `generation`, or null when the broker cannot list them (or does not offer the read). */
  private async changes(generation: number): Promise<TopologyChanges | null> {
    if (!this.offered) return null;
    try {
      return await this.client.topologyChanges(generation);
    } catch (err) {
      if (!(err instanceof ClusterHttpError) || err.status !== 404) throw err;
      this.offered = false;
      this.options.log?.info({}, 'the broker does not offer GET /v1/topology/changes: every read of the topology is whole');
      return null;
    }
  }
}
