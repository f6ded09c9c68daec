/**
 * What every CLI command shares: the connection to Temporal and the broker, exit codes, argument checks, the
 * common options (--json, --reason and its record in the audit log, an example in --help), tables, outcome lines,
 * and following a running reconfiguration (--wait). A command module uses these and nothing else of cli.ts.
 */
import os from 'node:os';
import type { WorkflowHandle } from '@temporalio/client';
import { type Command, CommanderError } from 'commander';
import { ClusterClient } from '../cluster/client';
import { PartitionId, NodeId } from '../cluster/contract';
import { projectDataDir, recordAction } from '../operations/audit';
import { loadEnv, temporalSettings } from '../worker/config';
import { statusQuery, type MoveOutcome, type MoveStatus, type ReconfigurationKind } from '../rules/definitions';
import { formatBytes } from '../rules/format';
import { outcomeOf, phasesSoFar } from '../operations/moves';

/** Exit status, documented in docs/cli.md ("Exit status") and `rebalancer --help`; scripts rely on it. */
export const EXIT = { done: 0, refused: 1, usage: 2, unreachable: 3 } as const;

/** A server the CLI needs does not answer: exit 3. */
export class Unreachable extends Error {
  override name = 'Unreachable';
}

export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  /** stdout when it is a terminal: live views redraw on it in place instead of printing lines. */
  terminal?: NodeJS.WriteStream;
  /** Ends a live view; without it, Ctrl-C (SIGINT) does. */
  signal?: AbortSignal;
}

export type Connected = Awaited<ReturnType<typeof connect>>;

/** What a command module's `register` receives. */
export interface CommandDeps {
  io: Io;
  /** A command that ran but did not succeed (a --wait move that did not complete) sets `exitCode`. */
  result: { exitCode: number };
  connect: () => Promise<Connected>;
}

/** The broker the commands read (CLUSTER_URL or the local port, CLUSTER_TOKEN). */
export function brokerOf(env: ReturnType<typeof loadEnv>): ClusterClient {
  return new ClusterClient(env.CLUSTER_URL ?? `http://127.0.0.1:${env.CLUSTER_PORT}`, { token: env.CLUSTER_TOKEN });
}

export const brokerUnreachable = (cluster: ClusterClient, err: unknown) =>
  new Unreachable(`cannot reach the broker at ${cluster.baseUrl} (${(err as Error).message}): is \`npm start\` running, or is CLUSTER_URL right?`);

/** Reads the same environment as the worker (TEMPORAL_*, CLUSTER_URL); an unreachable Temporal server is exit 3. */
export async function connect() {
  // Loaded here, not at the top: it takes about 0.3 s, which a command that needs no Temporal (plan --snapshot) should not wait for.
  const { Client, Connection } = await import('@temporalio/client');
  const env = loadEnv();
  const settings = temporalSettings(env, env.TEMPORAL_ADDRESS ?? `127.0.0.1:${env.TEMPORAL_PORT}`);
  const connection = await Connection.connect({ address: settings.address, tls: settings.tls, apiKey: settings.apiKey, connectTimeout: '5s' }).catch(
    (err: unknown) => {
      throw new Unreachable(
        `cannot reach the Temporal server at ${settings.address} (${(err as Error).message}): is \`npm start\` running, or is TEMPORAL_ADDRESS right?`,
      );
    },
  );
  const client = new Client({ connection, namespace: settings.namespace });
  const cluster = brokerOf(env);
  /** A new move and `show` of a partition without a move need the broker; the rest needs Temporal alone. */
  const needBroker = async (): Promise<ClusterClient> => {
    await cluster.health().catch((err: unknown) => {
      throw brokerUnreachable(cluster, err);
    });
    return cluster;
  };
  return { client, cluster, address: settings.address, taskQueue: settings.taskQueue, needBroker, close: () => connection.close() };
}

/** Runs `fn` with a connection that is closed afterwards, whatever happens. */
export async function withConnection<T>(deps: CommandDeps, fn: (ctx: Connected) => Promise<T>): Promise<T> {
  const ctx = await deps.connect();
  try {
    return await fn(ctx);
  } finally {
    await ctx.close();
  }
}

/** Bad usage (exit 2) naming the argument, the value given and what was expected. */
export function usageError(message: string): CommanderError {
  return new CommanderError(EXIT.usage, 'rebalancer.invalid', message);
}

export function parseId(kind: 'partition' | 'node', value: string): string {
  const parsed = (kind === 'partition' ? PartitionId : NodeId).safeParse(value);
  if (!parsed.success) throw usageError(`invalid ${kind} "${value}": expected ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

export function positiveInt(option: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw usageError(`invalid ${option} "${value}": expected a whole number of at least 1`);
  return n;
}

/**
 * A command with the options every command has: `--json`, and on an action (anything that changes the cluster)
 * `--reason <text>`; its --help ends with the examples.
 */
export function defineCommand(
  program: Command,
  name: string,
  spec: { description: string; examples: string[]; action?: { defaultReason: string } },
): Command {
  const cmd = program.command(name).description(spec.description);
  if (spec.action) cmd.option('--reason <text>', 'why: recorded with the action', spec.action.defaultReason);
  cmd.option('--json', 'print JSON (a refusal prints {"ok": false, "code", "message"})');
  return cmd.addHelpText('after', `\nExample${spec.examples.length > 1 ? 's' : ''}:\n${spec.examples.map((e) => `  $ ${e}`).join('\n')}`);
}

/** An operator action as it is recorded: the command, what it acts on, and the operator's reason. */
export interface OperatorAction {
  command: string;
  target: string;
  reason: string;
}

let pendingAction: OperatorAction | null = null;

/**
 * Every action's --reason passes through here on its way to the workflow request or update, so one place checks
 * it and one place records it: runCli writes it to the audit log with its outcome. Returns the reason to pass on.
 */
export function auditedReason(action: OperatorAction): string {
  const reason = action.reason.trim();
  if (!reason) throw usageError(`invalid --reason for ${action.command} ${action.target}: expected a few words saying why, got an empty text`);
  pendingAction = { ...action, reason };
  return reason;
}

/** The action this run recorded, once: runCli audits it when the command has ended. */
export function takeAction(): OperatorAction | null {
  const action = pendingAction;
  pendingAction = null;
  return action;
}

/** Who runs the CLI: the login name, as the admin API's X-Operator names its callers. */
function operator(): string {
  try {
    return os.userInfo().username;
  } catch {
    return process.env.USER ?? 'cli';
  }
}

/**
 * The CLI's hook: records the action its --reason came with, and the outcome, in DATA_DIR's log (the file the
 * admin API reads). A log that cannot be written is said on stderr, and the action's own result stands.
 */
export function auditCliAction(action: OperatorAction | null, outcome: string, io: Pick<Io, 'err'>): void {
  if (!action) return;
  try {
    const { command, target, reason } = action;
    recordAction(projectDataDir(loadEnv().DATA_DIR), { actor: operator(), source: 'cli', action: command, target, params: {}, reason, outcome });
  } catch (err) {
    io.err(`warning: the action was not recorded in the audit log: ${(err as Error).message}\n`);
  }
}

/** Prints `value` as one JSON line when --json was given, else the lines for people. */
export function print(io: Io, json: boolean | undefined, value: unknown, text: () => string): void {
  io.out(json ? JSON.stringify(value) + '\n' : text() + '\n');
}

export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  ')).join('\n');
}

/** `R -> T` for a move, `+T` for a replication-factor increase (nothing gives up a copy). */
export function moveLabel(from: string | null, to: string | null): string {
  if (!to) return '-';
  return from ? `${from}->${to}` : `+${to}`;
}

export function outcomeLine(o: MoveOutcome): string {
  if (o.status === 'completed') {
    const what = o.from ? `${o.from} -> ${o.to}` : `+${o.to}`;
    return `completed: ${o.partition} ${what}${o.boundary === null ? '' : `, boundary B ${o.boundary}`}, epoch ${o.epoch}`;
  }
  return o.status === 'aborted' ? `aborted (${o.code}): ${o.reason}` : `cancelled: ${o.reason}`;
}

/** One progress line of a running move: its phase, and what it waits for or how much is left to copy. */
export function progressLine(s: MoveStatus): string {
  if (s.blockingReason) return `${s.phase}: ${s.blockingReason}`;
  return s.phase === 'catching_up' && s.bytesRemaining !== null ? `${s.phase}: ${formatBytes(s.bytesRemaining)} remaining` : s.phase;
}

/** The phases a move ends in: its outcome line says how, so they get no progress line of their own. */
const ENDED_PHASES = new Set(['completed', 'cancelled', 'aborted']);

/**
 * Follows a reconfiguration to its end (--wait): a line per phase (from the history, so a phase shorter than a
 * poll still gets its line) plus what the current phase waits for (from the status query), then the outcome.
 * A reconfiguration that did not complete exits 1. With --json only the outcome is printed.
 */
export async function followMove(deps: CommandDeps, handle: WorkflowHandle, json: boolean | undefined): Promise<void> {
  const { io } = deps;
  const ended = handle.result().then(
    () => true,
    () => true,
  );
  let printedPhases = 0;
  let last = '';
  for (;;) {
    const done = await Promise.race([ended, new Promise<false>((r) => setTimeout(() => r(false), 500))]);
    if (!json) {
      const phases = await phasesSoFar(handle);
      for (const phase of phases.slice(printedPhases)) if (!ENDED_PHASES.has(phase) && phase !== last) io.out(`${(last = phase)}\n`);
      printedPhases = phases.length;
      const s = done ? null : await handle.query(statusQuery).catch(() => null);
      const line = s && !s.outcome ? progressLine(s) : '';
      if (line && line !== last && s!.phase === phases.at(-1)) io.out(`${(last = line)}\n`);
    }
    if (done) break;
  }
  const outcome = await outcomeOf(handle);
  if (!outcome) {
    const { status } = await handle.describe();
    print(io, json, { ok: false, code: 'no_outcome', message: `${handle.workflowId} ended ${status.name} without an outcome` }, () => `ended ${status.name.toLowerCase()} without an outcome`);
    deps.result.exitCode = EXIT.refused;
    return;
  }
  print(io, json, outcome, () => outcomeLine(outcome));
  if (outcome.status !== 'completed') deps.result.exitCode = EXIT.refused;
}

/** The `started` reply of an action without --wait. */
export function printStarted(
  io: Io,
  json: boolean | undefined,
  started: { workflowId: string; kind: ReconfigurationKind; partition: string; from: string | null; to: string },
): void {
  print(io, json, { started: true, ...started }, () => `started ${started.workflowId}: ${started.partition} ${started.from ? `${started.from} -> ${started.to}` : `+${started.to}`}`);
}
