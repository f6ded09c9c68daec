/**
 * `rebalancer`: what operators run. Reads the same environment as the worker (TEMPORAL_*, CLUSTER_URL).
 * Every command takes --json (a refusal then prints `{ "ok": false, "code", "message" }` on stdout).
 * Exit status: 0 done, 1 refused, 2 bad usage or configuration, 3 a server does not answer.
 */
import { createRequire } from 'node:module';
import { Client, Connection } from '@temporalio/client';
import { Command, CommanderError } from 'commander';
import { ClusterClient } from '../cluster/client';
import { PartitionId, NodeId } from '../cluster/contract';
import { ConfigError, loadEnv, temporalSettings } from '../worker/config';
import type { MoveOutcome, MoveStatus } from '../workflows/definitions';
import { formatBytes } from '../workflows/format';
import { cancelMove, listMoves, MoveRefused, phasesSoFar, recentMoves, showMove, startFollowerMove, type EndedMove } from './moves';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };

/** A server the CLI needs does not answer. */
class Unreachable extends Error {}

/** The phases a move ends in: its outcome line says how, so they get no progress line of their own. */
const ENDED_PHASES = new Set(['completed', 'cancelled', 'aborted']);

export const EXIT = { done: 0, refused: 1, usage: 2, unreachable: 3 } as const;

interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

async function connect() {
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
  const clusterUrl = env.CLUSTER_URL ?? `http://127.0.0.1:${env.CLUSTER_PORT}`;
  const cluster = new ClusterClient(clusterUrl, { token: env.CLUSTER_TOKEN });
  /** A new move and `show` of a partition without a move need the broker; the rest needs Temporal alone. */
  const needBroker = async (): Promise<ClusterClient> => {
    await cluster.health().catch((err: unknown) => {
      throw new Unreachable(`cannot reach the broker at ${clusterUrl} (${(err as Error).message}): is \`npm start\` running, or is CLUSTER_URL right?`);
    });
    return cluster;
  };
  return { client, cluster, taskQueue: settings.taskQueue, needBroker, close: () => connection.close() };
}

function parseId(kind: 'partition' | 'node', value: string): string {
  const parsed = (kind === 'partition' ? PartitionId : NodeId).safeParse(value);
  if (!parsed.success) throw new CommanderError(2, 'rebalancer.invalid', `invalid ${kind} "${value}": ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  ')).join('\n');
}

function outcomeLine(o: MoveOutcome): string {
  if (o.status === 'completed') return `completed: ${o.partition} ${o.from} -> ${o.to}, boundary B ${o.boundary}, epoch ${o.epoch}`;
  return o.status === 'aborted' ? `aborted (${o.code}): ${o.reason}` : `cancelled: ${o.reason}`;
}

/** One progress line of a running move: its phase, and what it waits for or how much is left to copy. */
function progressLine(s: MoveStatus): string {
  if (s.blockingReason) return `${s.phase}: ${s.blockingReason}`;
  return s.phase === 'catching_up' && s.bytesRemaining !== null ? `${s.phase}: ${formatBytes(s.bytesRemaining)} remaining` : s.phase;
}

function endedRow(m: EndedMove): string[] {
  const outcome = m.outcome ? outcomeLine(m.outcome) : m.executionStatus.toLowerCase();
  return [m.partition, m.from && m.to ? `${m.from}->${m.to}` : '-', m.closedAt ?? '-', outcome];
}

function positiveInt(option: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new CommanderError(2, 'rebalancer.invalid', `invalid ${option} "${value}": expected a whole number of at least 1`);
  return n;
}

function describe(s: MoveStatus): string {
  return [
    `partition:      ${s.partition}`,
    `move:           ${s.kind} ${s.from} -> ${s.to} (${s.origin})`,
    `phase:          ${s.phase}`,
    `bytes remaining: ${formatBytes(s.bytesRemaining)}`,
    `boundary B:     ${s.boundary ?? '-'}`,
    `target durable: ${s.targetDurable ?? '-'}`,
    `epoch:          ${s.epoch ?? '-'}`,
    `retries:        ${s.retries}`,
    `blocked on:     ${s.blockingReason ?? '-'}`,
    ...(s.outcome ? [`outcome:        ${outcomeLine(s.outcome)}`] : []),
  ].join('\n');
}

/** `result.exitCode` is set by a command that ran but did not succeed (a --wait move that did not complete). */
export function buildCli(io: Io, result = { exitCode: EXIT.done as number }): Command {
  const program = new Command('rebalancer')
    .description(
      'Operate live replica moves of a replicated queue broker. Every move is a durable Temporal workflow; ' +
        'settings come from the environment (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TASK_QUEUE, ' +
        'CLUSTER_URL, ...; see README.md). Exit status: 0 done, 1 refused, 2 bad usage or configuration, ' +
        '3 a server (Temporal or the broker) does not answer.',
    )
    .version(version)
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .showHelpAfterError();

  program
    .command('move')
    .description('move the follower copy of a queue partition from node R to node T without a fence')
    .argument('<partition>', 'queue partition id, e.g. q-3')
    .requiredOption('--from <node>', 'R: the follower that gives up its copy')
    .requiredOption('--to <node>', 'T: the node that receives the copy')
    .option('--wait', 'wait until the move ends, printing its phase as it goes')
    .option('--json', 'print JSON')
    .action(async (partitionArg: string, opts: { from: string; to: string; wait?: boolean; json?: boolean }) => {
      const partition = parseId('partition', partitionArg);
      const from = parseId('node', opts.from);
      const to = parseId('node', opts.to);
      const ctx = await connect();
      try {
        const handle = await startFollowerMove({ ...ctx, cluster: await ctx.needBroker() }, { partition, from, to, origin: 'operator' });
        if (!opts.wait) {
          io.out(opts.json ? JSON.stringify({ started: true, workflowId: handle.workflowId, partition, from, to }) + '\n' : `started ${handle.workflowId}: ${partition} ${from} -> ${to}\n`);
          return;
        }
        // Phases come from the history, so a phase shorter than a poll still gets its line; the status query
        // adds what the current phase waits for.
        let printedPhases = 0;
        let last = '';
        for (;;) {
          const done = await Promise.race([handle.result().then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 500))]);
          if (!opts.json) {
            const phases = await phasesSoFar(handle);
            for (const phase of phases.slice(printedPhases)) if (!ENDED_PHASES.has(phase) && phase !== last) io.out(`${(last = phase)}\n`);
            printedPhases = phases.length;
            const s = done ? null : await handle.query('status').catch(() => null) as MoveStatus | null;
            const line = s && !s.outcome ? progressLine(s) : '';
            if (line && line !== last && s!.phase === phases.at(-1)) io.out(`${(last = line)}\n`);
          }
          if (done) {
            const outcome = await handle.result();
            io.out(opts.json ? JSON.stringify(outcome) + '\n' : outcomeLine(outcome) + '\n');
            if (outcome.status !== 'completed') result.exitCode = EXIT.refused;
            return;
          }
        }
      } finally {
        await ctx.close();
      }
    });

  program
    .command('moves')
    .description('list every move in progress (phase, bytes remaining, blocking reason) and the moves that ended most recently')
    .option('--recent <n>', 'how many ended moves to list', (v) => positiveInt('--recent', v), 10)
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  rebalancer moves --recent 20')
    .action(async (opts: { recent: number; json?: boolean }) => {
      const ctx = await connect();
      try {
        const [running, ended] = await Promise.all([listMoves(ctx.client), recentMoves(ctx.client, opts.recent)]);
        if (opts.json) return io.out(JSON.stringify({ running, ended }) + '\n');
        io.out(
          running.length === 0
            ? 'no moves in progress\n'
            : table([
                ['PARTITION', 'MOVE', 'PHASE', 'REMAINING', 'BOUNDARY', 'BLOCKED ON'],
                ...running.map((m) => [m.partition, `${m.from}->${m.to}`, m.phase, formatBytes(m.bytesRemaining), String(m.boundary ?? '-'), m.blockingReason ?? '-']),
              ]) + '\n',
        );
        io.out(ended.length === 0 ? 'no ended moves\n' : `\nrecently ended:\n${table([['PARTITION', 'MOVE', 'ENDED', 'OUTCOME'], ...ended.map(endedRow)])}\n`);
      } finally {
        await ctx.close();
      }
    });

  program
    .command('show')
    .description('show the latest move of a partition: phase, bytes remaining, boundary B, blocking reason, outcome')
    .argument('<partition>', 'partition id')
    .option('--json', 'print JSON')
    .action(async (partitionArg: string, opts: { json?: boolean }) => {
      const partition = parseId('partition', partitionArg);
      const ctx = await connect();
      try {
        const detail = await showMove(ctx.client, partition, { topology: async () => (await ctx.needBroker()).topology(), baseUrl: ctx.cluster.baseUrl });
        if (opts.json) return io.out(JSON.stringify(detail) + '\n');
        io.out(`workflow:       ${detail.workflowId} (${detail.running ? 'running' : 'ended'})\n`);
        if (detail.status) io.out(describe(detail.status) + '\n');
        else if (detail.outcome) io.out(`outcome:        ${outcomeLine(detail.outcome)}\n`);
      } finally {
        await ctx.close();
      }
    });

  program
    .command('cancel')
    .description('cancel the move of a partition: before the swap the learner is dropped; after it, refused')
    .argument('<partition>', 'partition id')
    .option('--reason <text>', 'why, kept in the move outcome', 'cancelled by an operator')
    .option('--json', 'print JSON')
    .action(async (partitionArg: string, opts: { reason: string; json?: boolean }) => {
      const partition = parseId('partition', partitionArg);
      const ctx = await connect();
      try {
        const s = await cancelMove(ctx.client, partition, opts.reason);
        io.out(opts.json ? JSON.stringify(s) + '\n' : `cancel accepted for ${partition}: the learner ${s.to} will be dropped\n`);
      } finally {
        await ctx.close();
      }
    });

  return program;
}

/** Runs the CLI; returns the exit status instead of exiting, so tests can call it. */
export async function runCli(argv: string[], io: Io = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) }): Promise<number> {
  const result = { exitCode: EXIT.done as number };
  const program = buildCli(io, result);
  // A script that asked for JSON gets its failure as JSON on stdout too; people read the line on stderr.
  const fail = (exitCode: number, code: string, message: string, line: string): number => {
    if (argv.includes('--json')) io.out(JSON.stringify({ ok: false, code, message }) + '\n');
    io.err(line + '\n');
    return exitCode;
  };
  try {
    await program.parseAsync(argv, { from: 'user' });
    return result.exitCode;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.exitCode === 0) return EXIT.done;
      // Commander has printed its own usage error already.
      if (err.code !== 'rebalancer.invalid') return EXIT.usage;
      return fail(EXIT.usage, 'bad_usage', err.message, `error: ${err.message}`);
    }
    if (err instanceof ConfigError) return fail(EXIT.usage, 'bad_config', err.message, `configuration error: ${err.message}`);
    if (err instanceof Unreachable) return fail(EXIT.unreachable, 'unreachable', err.message, `error: ${err.message}`);
    if (err instanceof MoveRefused) return fail(EXIT.refused, err.code, err.message, `refused (${err.code}): ${err.message}`);
    return fail(EXIT.refused, 'error', (err as Error).message, `error: ${(err as Error).message}`);
  }
}
