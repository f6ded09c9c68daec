/**
 * SQLite persistence of the reference cluster (better-sqlite3, WAL). One row of JSON per node and per
 * partition; only rows the simulation marked dirty are written. Each accepted guarded write, and each
 * simulation step, is one transaction together with its events and, for a write, its idempotent reply, so a
 * reply that was sent always survives kill -9 and a retry finds it.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Breach, ClusterEvent } from './contract';
import { defaultConfig, type NodeState, type PartitionState, type ReplicaState, type SimChanges, type SimConfig, type SimMeta, type SimSnapshot } from './sim/types';

export interface StoredReply {
  key: string;
  /** The request (partition, write, canonical body) the key was first used with. */
  fingerprint: string;
  status: number;
  body: string;
}

/** Events beyond this many are trimmed, oldest first. */
const EVENT_CAP = 1_000_000;

export class ClusterStore {
  private readonly db: Database.Database;
  private readonly stmts;
  private persists = 0;

  /** dir: the data directory (cluster.db inside it), or undefined for an in-memory database. */
  constructor(dir?: string) {
    let file = ':memory:';
    if (dir) {
      fs.mkdirSync(dir, { recursive: true });
      file = path.join(dir, 'cluster.db');
    }
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    // NORMAL in WAL mode keeps every committed transaction across a process kill (not a power loss).
    this.db.pragma('synchronous = NORMAL');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS nodes (id TEXT PRIMARY KEY, json TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS partitions (id TEXT PRIMARY KEY, json TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, visible_at INTEGER NOT NULL, json TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS breaches (id INTEGER PRIMARY KEY AUTOINCREMENT, json TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, status INTEGER NOT NULL, body TEXT NOT NULL);
    `);
    this.stmts = {
      putMeta: this.db.prepare('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)'),
      getMeta: this.db.prepare<[string], { v: string }>('SELECT v FROM meta WHERE k = ?'),
      // Upserts keep the rowid, so a reload sees nodes and partitions in creation order.
      putNode: this.db.prepare('INSERT INTO nodes (id, json) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET json = excluded.json'),
      putPartition: this.db.prepare(
        'INSERT INTO partitions (id, json) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET json = excluded.json',
      ),
      putEvent: this.db.prepare('INSERT INTO events (seq, visible_at, json) VALUES (?, ?, ?)'),
      putBreach: this.db.prepare('INSERT INTO breaches (json) VALUES (?)'),
      putReply: this.db.prepare('INSERT INTO replies (key, fingerprint, status, body) VALUES (?, ?, ?, ?)'),
      getReply: this.db.prepare<[string], StoredReply>('SELECT key, fingerprint, status, body FROM replies WHERE key = ?'),
      readEvents: this.db.prepare<[number, number, number], { json: string }>(
        'SELECT json FROM events WHERE seq > ? AND visible_at <= ? ORDER BY seq LIMIT ?',
      ),
      trimEvents: this.db.prepare('DELETE FROM events WHERE seq <= ?'),
      deleteNode: this.db.prepare('DELETE FROM nodes WHERE id = ?'),
      deletePartition: this.db.prepare('DELETE FROM partitions WHERE id = ?'),
    };
  }

  /** The saved simulation, or null for a fresh data directory. */
  load(): SimSnapshot | null {
    const meta = this.stmts.getMeta.get('sim');
    if (!meta) return null;
    const rows = (table: string) =>
      (this.db.prepare(`SELECT json FROM ${table} ORDER BY rowid`).all() as { json: string }[]).map(
        (r) => JSON.parse(r.json) as unknown,
      );
    const stored = JSON.parse(meta.v) as SimMeta;
    const config = knownConfig(stored.config);
    return {
      meta: { ...stored, config },
      // A node saved down by a version without downSince has been down at least since that save.
      nodes: (rows('nodes') as NodeState[]).map((n) => ({ ...n, downSince: n.downSince ?? (n.live ? null : stored.now) })),
      partitions: (rows('partitions') as PartitionState[]).map((p) => withDefaults(p, config)),
      breaches: rows('breaches') as Breach[],
    };
  }

  /** One transaction: the simulation's changes and, for a guarded write, its reply. */
  persist(changes: SimChanges, reply?: StoredReply): void {
    const s = this.stmts;
    this.db.transaction(() => {
      s.putMeta.run('sim', JSON.stringify(changes.meta));
      for (const n of changes.nodes) s.putNode.run(n.id, JSON.stringify(n));
      for (const p of changes.partitions) s.putPartition.run(p.id, JSON.stringify(p));
      for (const e of changes.events) s.putEvent.run(e.event.seq, e.visibleAt, JSON.stringify(e.event));
      for (const b of changes.breaches) s.putBreach.run(JSON.stringify(b));
      if (reply) s.putReply.run(reply.key, reply.fingerprint, reply.status, reply.body);
    })();
    if (++this.persists % 1000 === 0) s.trimEvents.run(changes.meta.lastSeq - EVENT_CAP);
  }

  /** One transaction: a node or partition the simulation forgot (a test control) and the changes around it. */
  delete(what: 'node' | 'partition', id: string, changes: SimChanges): void {
    this.db.transaction(() => {
      (what === 'node' ? this.stmts.deleteNode : this.stmts.deletePartition).run(id);
      this.persist(changes);
    })();
  }

  lookupReply(key: string): StoredReply | undefined {
    return this.stmts.getReply.get(key);
  }

  /** Events after `after` that are readable at simulated time `now`, oldest first. */
  readEvents(after: number, limit: number, now: number): ClusterEvent[] {
    return this.stmts.readEvents.all(after, now, limit).map((r) => JSON.parse(r.json) as ClusterEvent);
  }

  close(): void {
    this.db.close();
  }
}

/**
 * Only the tunables this version knows: a data directory written by an older version may carry a test-only
 * switch (unsafeSkipBoundaryCheck) in its stored config, which is dropped here and never honoured.
 */
function knownConfig(stored: SimConfig): SimConfig {
  return Object.fromEntries(Object.entries(stored).filter(([k]) => Object.hasOwn(defaultConfig, k))) as unknown as SimConfig;
}

/**
 * Rows written by older versions lack later fields: transfers that could not pause for recovery are not
 * paused, and partitions without their own message size use the cluster's.
 */
function withDefaults(p: PartitionState, config: SimConfig): PartitionState {
  for (const r of Object.values(p.replicas) as Partial<ReplicaState>[]) r.pausedForRecovery ??= false;
  (p as Partial<PartitionState>).messageBytes ??= config.messageBytes;
  return p;
}
