/**
 * The topology kept current from the broker's changes read (GET /v1/topology/changes) instead of read whole each
 * time: at 100,000 partitions the whole topology is about 60 MB and takes over a second to serve, parse and check,
 * while a tick's changes are a few records. The whole topology is read at the start and when the broker cannot list
 * the changes (410: it restarted), in pages where the broker offers them (GET /v1/topology/page), so no read is one
 * 60 MB string. Every `fullEveryMs` a check passes over every record beside the reads (they go on from the model
 * while it runs), a page at a time where the broker offers pages, else in one whole read: records the changes read
 * left different from the broker's are drift, logged and counted, and the broker's records replace the model's. A
 * whole read held the broker and this process for a second or more at 100,000 partitions, once a minute: every
 * read, tick and page waiting behind it. Records that did not change keep the advisory figures (history bytes,
 * rates) of the last read that brought them, at most about `fullEveryMs` old: they move slowly, and the planner's
 * cooldowns are longer.
 */
import { ClusterHttpError, type ClusterClient } from './client';
import { TOPOLOGY_PAGE_MAX, type Partition, type Topology, type TopologyChanges, type TopologyPage } from './contract';
import { carry, placesOf, seal } from './derived';

export interface ModelStats {
  fullReads: number;
  /** Pages read (GET /v1/topology/page): the check's, one per `CHECK_PAGE` records, and a whole read's (10,000 each). */
  pageReads: number;
  changesReads: number;
  /** Reads that asked for changes and read whole instead: the broker could not list them (410), or does not offer the read (404, once). */
  fallbacks: number;
  /** Records a whole read or a page found different from the model (assignment fields, not advisory figures). */
  drifts: number;
}

export interface ModelOptions {
  /** How often a check passes over every record; 0 reads the whole topology every time. */
  fullEveryMs?: number;
  /** Records a page of the check (`CHECK_PAGE`). */
  checkPage?: number;
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

/** Records a page of the check: about 1.2 MB of JSON, some 20 ms to read and compare at 100,000 partitions. */
export const CHECK_PAGE = 2_000;

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
  // The common tick at size: nothing or a few records changed, none created or deleted. The order stays, so what was
  // derived of the records (their places by id, those not at rest) serves the next topology too.
  const index = placesOf(topology.partitions);
  if (changes.removed.length === 0 && changes.partitions.every((p) => index.has(p.id))) {
    if (changes.partitions.length === 0) return { ...head, partitions: topology.partitions };
    const partitions = topology.partitions.slice();
    for (const p of changes.partitions) partitions[index.get(p.id)!] = p;
    carry(topology.partitions, partitions, changes.partitions);
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

/** Whether the broker's record carries the same advisory figures (what time alone moves) as the model's. */
function sameAdvisory(a: Partition, b: Partition): boolean {
  return (
    a.historyBytes === b.historyBytes &&
    a.publishRate === b.publishRate &&
    a.deliveryRate === b.deliveryRate &&
    a.retainedCopies.length === b.retainedCopies.length &&
    a.retainedCopies.every((c, i) => c.bytesToCatchUp === b.retainedCopies[i]!.bytesToCatchUp)
  );
}

/**
 * `held` with the advisory figures of `p`, a record of the same assignment: the same arrays for everything else, so a
 * reading kept from plan to plan sees that only the figures moved and leaves the copies' places as they are.
 */
function withFigures(held: Partition, p: Partition): Partition {
  return { ...held, historyBytes: p.historyBytes, publishRate: p.publishRate, deliveryRate: p.deliveryRate, retainedCopies: p.retainedCopies };
}

/**
 * `model` with one page of the broker's records in it, and the ids that drifted. `model` is at or after the page's
 * generation, and `moved` holds the records changed since the older of the two, which may differ for good reason;
 * any other record of the page's range (ids after `after`, up to `next`) that differs, is missing or is extra is
 * drift. A record that did not drift is replaced only when its advisory figures moved, and then by one sharing the
 * rest (`withFigures`), so a reading kept from plan to plan (planner/kept.ts) reads again only what changed, and of
 * those records only the figures.
 */
export function withPage(model: Topology, page: TopologyPage, after: string | null, moved: ReadonlySet<string>): { topology: Topology; drifted: string[] } {
  const index = placesOf(model.partitions);
  const partitions = model.partitions.slice();
  const drifted: string[] = [];
  const replaced: Partition[] = [];
  const listed = new Set<string>();
  const added: Partition[] = [];
  for (const p of page.partitions) {
    listed.add(p.id);
    if (moved.has(p.id)) continue;
    const i = index.get(p.id);
    if (i === undefined) {
      drifted.push(p.id);
      added.push(p);
      continue;
    }
    const held = partitions[i]!;
    if (assignmentOf(held) !== assignmentOf(p)) {
      drifted.push(p.id);
      replaced.push((partitions[i] = p));
    } else if (!sameAdvisory(held, p)) replaced.push((partitions[i] = withFigures(held, p)));
  }
  const inRange = (id: string) => (after === null || id > after) && (page.next === null || id <= page.next);
  const gone = new Set(model.partitions.filter((p) => inRange(p.id) && !listed.has(p.id) && !moved.has(p.id)).map((p) => p.id));
  drifted.push(...gone);
  if (added.length === 0 && gone.size === 0) {
    carry(model.partitions, partitions, replaced);
    return { topology: { ...model, partitions }, drifted };
  }
  return { topology: { ...model, partitions: [...partitions.filter((p) => !gone.has(p.id)), ...added] }, drifted };
}

export class TopologyModel {
  private topology: Topology | null = null;
  private fullAt = 0;
  /** False once the broker answered 404: it does not offer the changes read, so every read is whole. */
  private offered = true;
  private queue: Promise<unknown> = Promise.resolve();
  /** The check's read (whole, or a page and its adoption), while it runs: reads go on from the model meanwhile. */
  private checking: Promise<void> | null = null;
  /** False once the broker answered 404 to a page: each check is then one whole read. */
  private paged: boolean;
  /** The paged check under way: the last id of the page before (null before the first page). */
  private pass: { after: string | null } | null = null;
  private pageAt = 0;
  private readonly stats: ModelStats = { fullReads: 0, pageReads: 0, changesReads: 0, fallbacks: 0, drifts: 0 };
  private readonly fullEveryMs: number;
  private readonly checkPageSize: number;
  private readonly now: () => number;

  constructor(
    private readonly client: Pick<ClusterClient, 'topology' | 'topologyChanges'> & Partial<Pick<ClusterClient, 'topologyPage'>>,
    private readonly options: ModelOptions = {},
  ) {
    this.paged = client.topologyPage !== undefined;
    this.fullEveryMs = options.fullEveryMs ?? DEFAULT_FULL_EVERY_MS;
    this.checkPageSize = options.checkPage ?? CHECK_PAGE;
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
    this.checkIfDue(held);
    const started = performance.now();
    const changes = await this.changes(held.generation);
    if (changes === null) {
      this.stats.fallbacks++;
      return this.adopt(await this.full(null));
    }
    const topology = applyChanges(held, changes);
    this.hold(topology);
    this.stats.changesReads++;
    this.options.log?.debug({ read: 'changes', ms: Math.round(performance.now() - started), changed: changes.partitions.length + changes.removed.length, generation: changes.generation }, 'topology read');
    return topology;
  }

  /**
   * The periodic check, beside the reads: at 100,000 partitions the whole read takes seconds, which neither the loop's
   * tick nor a page should wait for. A pass of pages starts every `fullEveryMs` and spreads its pages over half of
   * it (50 pages of 2,000 records, one every 0.6 s, at 100,000 partitions); a broker without pages is read whole.
   */
  private checkIfDue(held: Topology): void {
    if (this.checking !== null) return;
    const now = this.now();
    if (this.pass === null) {
      if (now - this.fullAt < this.fullEveryMs) return;
      if (!this.paged) return this.check(held);
      this.fullAt = now;
      this.pass = { after: null };
    } else if (now - this.pageAt < this.fullEveryMs / 2 / Math.ceil(held.partitions.length / this.checkPageSize)) return;
    this.checkPage(this.pass);
  }

  /**
   * One page of the check: once read, it waits its turn among the reads, brings the model up to date with the changes
   * since the older of the two, and puts the page's records in (`withPage`).
   */
  private checkPage(pass: { after: string | null }): void {
    this.pageAt = this.now();
    const started = performance.now();
    this.checking = this.client.topologyPage!(pass.after, this.checkPageSize)
      .then((page) => {
        this.stats.pageReads++;
        const adopted = this.queue.then(async () => {
          const current = this.topology!;
          const since = await this.changes(Math.min(current.generation, page.generation));
          // The broker cannot say what changed since: keep the model; the next read falls back to a whole one.
          if (since === null) return;
          const { topology, drifted } = withPage(applyChanges(current, since), page, pass.after, new Set([...since.partitions.map((p) => p.id), ...since.removed]));
          this.drift(drifted);
          this.hold(topology);
          this.options.log?.debug({ read: 'page', ms: Math.round(performance.now() - started), records: page.partitions.length, drifted: drifted.length, generation: topology.generation }, 'topology read');
          pass.after = page.next;
          if (page.next === null && this.pass === pass) this.pass = null;
        });
        this.queue = adopted.catch(() => undefined);
        return adopted;
      })
      .catch((err: unknown) => {
        if (err instanceof ClusterHttpError && err.status === 404) {
          this.paged = false;
          this.pass = null;
          this.fullAt = 0;
          this.options.log?.info({}, 'the broker does not offer GET /v1/topology/page: the check reads the topology whole');
        } else this.options.log?.warn({ err }, 'a page of the check of the topology model failed; it is read again at the next page');
      })
      .finally(() => {
        this.checking = null;
      });
  }

  private drift(drifted: string[]): void {
    if (drifted.length === 0) return;
    this.stats.drifts += drifted.length;
    this.options.log?.warn(
      { drifted: drifted.length, partitions: drifted.slice(0, 10), driftsTotal: this.stats.drifts },
      `the changes read left ${drifted.length} partition record(s) different from the broker's; its records replace them`,
    );
  }

  /** The check in one whole read: its result replaces the model between two reads, brought up to date by the changes. */
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

  /** The model's topology from now on: its list of records is handed out, and never changed in place (cluster/derived.ts). */
  private hold(topology: Topology): void {
    seal(topology.partitions);
    this.topology = topology;
  }

  /** A whole read's topology: it checked every record, so the period and any pass under way start again. */
  private adopt(topology: Topology): Topology {
    this.hold(topology);
    this.fullAt = this.now();
    this.pass = null;
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
    const fresh = (held === null ? await this.inPages() : null) ?? (await this.client.topology());
    const after = model === null ? null : await this.changes(model.generation);
    let topology = fresh;
    if (model !== null && after !== null) {
      const moved = new Set([...after.partitions.map((p) => p.id), ...after.removed]);
      this.drift(driftBetween(model, fresh, moved));
      topology = applyChanges(fresh, after);
    }
    this.stats.fullReads++;
    this.options.log?.debug({ read: 'whole', ms: Math.round(performance.now() - started), checked: model !== null, generation: topology.generation }, 'topology read');
    return topology;
  }

  /**
   * The whole topology read in pages of the most records the contract allows, then brought to one generation by the
   * changes since the first page's (a record changed since is listed there, newer than any page's): no read of the
   * broker is one 60 MB string at 100,000 partitions, which past about 860,000 no string can hold. Null where the
   * broker offers no pages or cannot list the changes: read it whole.
   */
  private async inPages(): Promise<Topology | null> {
    if (!this.paged || !this.offered) return null;
    const partitions: Partition[] = [];
    let first: TopologyPage | null = null;
    let page: TopologyPage;
    try {
      for (let after: string | null = null; ; after = page.next) {
        page = await this.client.topologyPage!(after, TOPOLOGY_PAGE_MAX);
        this.stats.pageReads++;
        first ??= page;
        for (const p of page.partitions) partitions.push(p);
        if (page.next === null) break;
      }
    } catch (err) {
      if (!(err instanceof ClusterHttpError) || err.status !== 404) throw err;
      this.paged = false;
      this.options.log?.info({}, 'the broker does not offer GET /v1/topology/page: the topology is read whole');
      return null;
    }
    const since = await this.changes(first.generation);
    if (since === null) return null;
    return applyChanges({ contractVersion: page.contractVersion, generation: first.generation, now: first.now, nodes: page.nodes, partitions }, since);
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
