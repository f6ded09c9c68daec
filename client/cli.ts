/**
 * `rebalancer`: what operators run. Reads the same environment as the worker (TEMPORAL_*, CLUSTER_URL).
 * Every read command takes --json; a refusal exits 1 with the reason on stderr; bad usage exits 2.
 */
import { Client, Connection } from '@temporalio/client';
import { Command, CommanderError } from 'commander';
import { ClusterClient } from '../cluster/client';
import { PartitionId, NodeId } from '../cluster/contract';
import { ConfigError, loadEnv, temporalSettings } from '../worker/config';
import type { MoveStatus } from '../workflows/definitions';
import { formatBytes } from '../workflows/format';
import { cancelMove, listMoves, MoveRefused, showMove, startFollowerMove } from './moves';

/** A server the CLI needs does not answer. */
class Unreachable extends Error {}

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
  /** Only a new move needs the broker; listing, showing and cancelling need Temporal alone. */
  const needBroker = async (): Promise<void> => {
    await cluster.health().catch((err: unknown) => {
      throw new Unreachable(`cannot reach the broker at ${clusterUrl} (${(err as Error).message}): is \`npm start\` running, or is CLUSTER_URL right?`);
    });
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
    ...(s.outcome ? [`outcome:        ${s.outcome.status}${'reason' in s.outcome ? `: ${s.outcome.reason}` : ''}`] : []),
  ].join('\n');
}

export function buildCli(io: Io): Command {
  const program = new Command('rebalancer')
    .description(
      'Operate live replica moves of a replicated queue broker. Every move is a durable Temporal workflow; ' +
        'settings come from the environment (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TASK_QUEUE, ' +
        'CLUSTER_URL, ...; see README.md). Exit status: 0 done, 1 refused (reason on stderr), 2 bad usage.',
    )
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
        await ctx.needBroker();
        const handle = await startFollowerMove(ctx, { partition, from, to, origin: 'operator' });
        if (!opts.wait) {
          io.out(opts.json ? JSON.stringify({ started: true, workflowId: handle.workflowId, partition, from, to }) + '\n' : `started ${handle.workflowId}: ${partition} ${from} -> ${to}\n`);
          return;
        }
        let last = '';
        for (;;) {
          const done = await Promise.race([handle.result().then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 1000))]);
          const s = await handle.query('status').catch(() => null) as MoveStatus | null;
          const line = s ? `${s.phase}: ${s.blockingReason ?? ''}` : '';
          if (!opts.json && line && line !== last) io.out(`${line}\n`);
          last = line;
          if (done) {
            const outcome = await handle.result();
            io.out(opts.json ? JSON.stringify(outcome) + '\n' : `${outcome.status}${'reason' in outcome ? `: ${outcome.reason}` : ''}\n`);
            if (outcome.status !== 'completed') process.exitCode = 1;
            return;
          }
        }
      } finally {
        await ctx.close();
      }
    });

  program
    .command('moves')
    .description('list every move in progress with its phase, bytes remaining and blocking reason')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const ctx = await connect();
      try {
        const moves = await listMoves(ctx.client);
        if (opts.json) return io.out(JSON.stringify(moves) + '\n');
        if (moves.length === 0) return io.out('no moves in progress\n');
        io.out(
          table([
            ['PARTITION', 'MOVE', 'PHASE', 'REMAINING', 'BOUNDARY', 'BLOCKED ON'],
            ...moves.map((m) => [m.partition, `${m.from}->${m.to}`, m.phase, formatBytes(m.bytesRemaining), String(m.boundary ?? '-'), m.blockingReason ?? '-']),
          ]) + '\n',
        );
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
        const detail = await showMove(ctx.client, partition);
        if (opts.json) return io.out(JSON.stringify(detail) + '\n');
        io.out(`workflow:       ${detail.workflowId} (${detail.running ? 'running' : 'ended'})\n`);
        if (detail.status) io.out(describe(detail.status) + '\n');
        else if (detail.outcome) io.out(`outcome:        ${JSON.stringify(detail.outcome)}\n`);
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
  const program = buildCli(io);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.exitCode === 0) return 0;
      if (err.code === 'rebalancer.invalid') io.err(`error: ${err.message}\n`);
      return 2;
    }
    if (err instanceof ConfigError) {
      io.err(`configuration error: ${err.message}\n`);
      return 2;
    }
    if (err instanceof Unreachable) {
      io.err(`error: ${err.message}\n`);
      return 1;
    }
    if (err instanceof MoveRefused) {
      io.err(`refused (${err.code}): ${err.message}\n`);
      return 1;
    }
    io.err(`error: ${(err as Error).message}\n`);
    return 1;
  }
}
