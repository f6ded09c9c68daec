/**
 * The audit log: every operator action (admin API, dashboard or CLI) with who, when, what, the reason given and
 * the outcome. One SQLite file in the data directory, so it survives restarts; written before the answer goes
 * out, so an action the operator saw acknowledged is on record.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';

/** Where the action came from. */
export type AuditSource = 'api' | 'dashboard' | 'cli';

export interface AuditAction {
  /** Who: the operator's name as given (X-Operator header, --operator, $USER), else the source. */
  actor: string;
  source: AuditSource;
  /** What: the action's name (pause, resume, move, handoff, grow, replace, drain, undrain, cancel). */
  action: string;
  /** The partition or node it names, when it names one. */
  target: string | null;
  /** The action's parameters as the operator gave them. */
  params: Record<string, unknown>;
  reason: string;
  /** `ok`, or `refused (code): message` / `error: message`. */
  outcome: string;
}

export interface AuditEntry extends AuditAction {
  id: number;
  /** ISO 8601, UTC. */
  at: string;
}

export class AuditLog {
  private readonly db: Database.Database;
  private readonly insert: Database.Statement<[string, string, string, string, string | null, string, string, string]>;

  /** `file` null keeps the log in memory (tests of the API that do not test restarts). */
  constructor(file: string | null) {
    if (file) fs.mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file ?? ':memory:');
    this.db.pragma('journal_mode = WAL');
    this.db.exec(`CREATE TABLE IF NOT EXISTS audit (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      at TEXT NOT NULL, actor TEXT NOT NULL, source TEXT NOT NULL, action TEXT NOT NULL,
      target TEXT, params TEXT NOT NULL, reason TEXT NOT NULL, outcome TEXT NOT NULL)`);
    this.insert = this.db.prepare(
      'INSERT INTO audit (at, actor, source, action, target, params, reason, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    );
  }

  record(a: AuditAction, at = new Date()): AuditEntry {
    const iso = at.toISOString();
    const { lastInsertRowid } = this.insert.run(iso, a.actor, a.source, a.action, a.target, JSON.stringify(a.params), a.reason, a.outcome);
    return { id: Number(lastInsertRowid), at: iso, ...a };
  }

  /** Newest first; `before` pages back from an entry id. */
  list(options: { limit: number; before?: number }): AuditEntry[] {
    const rows = this.db
      .prepare<[number, number], Omit<AuditEntry, 'params'> & { params: string }>(
        'SELECT * FROM audit WHERE id < ? ORDER BY id DESC LIMIT ?',
      )
      .all(options.before ?? Number.MAX_SAFE_INTEGER, options.limit);
    return rows.map((r) => ({ ...r, source: r.source, params: JSON.parse(r.params) as Record<string, unknown> }));
  }

  /** The actions named that succeeded since `since`, oldest first (the dashboard marks pauses and resumes). */
  succeeded(actions: string[], since: Date): AuditEntry[] {
    const rows = this.db
      .prepare<unknown[], Omit<AuditEntry, 'params'> & { params: string }>(
        `SELECT * FROM audit WHERE at >= ? AND outcome = 'ok' AND action IN (${actions.map(() => '?').join(',')}) ORDER BY id`,
      )
      .all(since.toISOString(), ...actions);
    return rows.map((r) => ({ ...r, params: JSON.parse(r.params) as Record<string, unknown> }));
  }

  close(): void {
    this.db.close();
  }
}

/** The audit file of a data directory: the admin API and the CLI on one machine share it. */
export function auditFile(dataDir: string): string {
  return path.join(dataDir, 'audit.db');
}

/** The data directory `npm start` uses (DATA_DIR, relative to the project): the CLI's audit log is its file too. */
export function projectDataDir(dataDir: string): string {
  return path.resolve(import.meta.dirname, '..', dataDir);
}

/** For the CLI: record one action in the data directory's audit log (the file the admin API reads). */
export function recordAction(dataDir: string, action: AuditAction): AuditEntry {
  const log = new AuditLog(auditFile(dataDir));
  try {
    return log.record(action);
  } finally {
    log.close();
  }
}

/** For `rebalancer audit`: the newest entries, none when nothing was ever recorded in this data directory. */
export function readAudit(dataDir: string, options: { limit: number; before?: number }): AuditEntry[] {
  if (!fs.existsSync(auditFile(dataDir))) return [];
  const log = new AuditLog(auditFile(dataDir));
  try {
    return log.list(options);
  } finally {
    log.close();
  }
}
