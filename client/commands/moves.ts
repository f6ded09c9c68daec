import type { Command } from 'commander';
import { formatBytes } from '../../rules/format';
import { LastAnswers, listMovesInProgress, moveStatusesWithin, recentMoves, type EndedMove } from '../../operations/moves';
import type { MoveStatus } from '../../rules/definitions';
import { defineCommand, moveLabel, outcomeLine, positiveInt, table, withConnection, type CommandDeps, type Connected } from '../output';
import { DIRECT_WAIT_MS, movesView, readFromLine } from '../views';
import { watchMoves } from '../watch';

function endedRow(m: EndedMove): string[] {
  const outcome = m.outcome ? outcomeLine(m.outcome) : m.executionStatus.toLowerCase();
  return [m.partition, m.kind ?? '-', moveLabel(m.from, m.to), m.closedAt ?? '-', outcome];
}

/**
 * The watch's list of moves in progress, each refresh waiting at most `waitMs` for the moves' answers: a move that
 * has not answered keeps its last answer (so it neither vanishes nor reads as ended), and one that never answered
 * yet shows from its first answer on. A move visibility no longer lists, or whose query fails, has ended.
 */
function watchedMoves(ctx: Pick<Connected, 'client' | 'taskQueue'>, waitMs: number): () => Promise<MoveStatus[]> {
  const answers = new LastAnswers();
  return async () => {
    const listed = await listMovesInProgress(ctx.client, ctx.taskQueue);
    const { answered, late } = await moveStatusesWithin(ctx.client, listed, waitMs, answers.heard);
    const shown = new Map([...answered, ...answers.late(listed, late).known.map((k) => k.status)].map((m) => [m.partition, m]));
    return listed.flatMap((l) => shown.get(l.partition) ?? []);
  };
}

/** Aborted by Ctrl-C, which then ends the watch instead of the process. */
function untilInterrupted(): { signal: AbortSignal; release: () => void } {
  const controller = new AbortController();
  const abort = () => controller.abort();
  process.once('SIGINT', abort);
  return { signal: controller.signal, release: () => process.off('SIGINT', abort) };
}

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'moves', {
    description:
      'list every reconfiguration in progress (phase, bytes remaining, blocking reason) and how the most recent ones ended, ' +
      'through the admin service when it runs for this broker and task queue (ADMIN_URL), else from Temporal; --watch follows the running ones live',
    examples: ['rebalancer moves --recent 20', 'rebalancer moves --watch'],
  })
    .option('--recent <n>', 'how many ended moves to list', (v) => positiveInt('--recent', v), 10)
    .option('--watch', 'follow the running moves live (a progress bar each on a terminal, lines otherwise) until Ctrl-C')
    .option('--every <seconds>', 'with --watch: refresh every this many seconds', (v) => positiveInt('--every', v), 1)
    .option(
      '--wait <seconds>',
      "how long to wait for the moves' status answers (each refresh with --watch); one that has not answered is listed as visibility shows it " +
        '(in `late` with --json), or with its last answer (through the admin service, and with --watch); default 1 s, through the admin service its page bound (0.3 s)',
      (v) => positiveInt('--wait', v),
    )
    .action(async (opts: { recent: number; watch?: boolean; every: number; wait?: number; json?: boolean }) => {
      const { io } = deps;
      const waitMs = opts.wait === undefined ? undefined : opts.wait * 1000;
      if (opts.watch) {
        await withConnection(deps, async (ctx) => {
          const interrupt = io.signal ? null : untilInterrupted();
          try {
            await watchMoves(watchedMoves(ctx, waitMs ?? DIRECT_WAIT_MS), {
              everyMs: opts.every * 1000,
              signal: io.signal ?? interrupt!.signal,
              terminal: io.terminal,
              out: io.out,
              json: opts.json,
            });
          } finally {
            interrupt?.release();
          }
        });
        return;
      }
      const { view, from, waitedMs } = await movesView(opts.recent, waitMs, (directWaitMs) =>
        withConnection(deps, async (ctx) => {
          const [listed, ended] = await Promise.all([listMovesInProgress(ctx.client, ctx.taskQueue), recentMoves(ctx.client, opts.recent)]);
          // A busy worker answers a workflow's query only between its workflow tasks: with 1,000 moves in flight the
          // slowest took 33 s. A move that has not answered within --wait is listed as visibility shows it.
          const { answered: running, late } = await moveStatusesWithin(ctx.client, listed, directWaitMs);
          return { view: { running, late, ended }, address: ctx.address };
        }),
      );
      const { running, late, ended } = view;
      if (opts.json) return io.out(JSON.stringify({ running, late, ended, readFrom: from, waitedMs }) + '\n');
      // A move whose query was late shows its last answer (through the admin service) or, never heard from, its
      // phase as visibility lists it.
      const asOf = (m: { asOf?: string }) => (m.asOf ? `(as of ${m.asOf.slice(11, 19)}: no answer within ${waitedMs / 1000} s) ` : '');
      const rows = [
        ...running.map((m) => [m.partition, m.kind, moveLabel(m.from, m.to), m.phase, formatBytes(m.bytesRemaining), String(m.boundary ?? '-'), asOf(m) + (m.blockingReason ?? '-')]),
        ...late.map((l) => [l.partition, l.kind, moveLabel(l.from, l.to), l.phase, '?', '?', `(no status within ${waitedMs / 1000} s: phase as visibility lists it)`]),
      ];
      io.out(rows.length === 0 ? 'no moves in progress\n' : table([['PARTITION', 'KIND', 'MOVE', 'PHASE', 'REMAINING', 'BOUNDARY', 'BLOCKED ON'], ...rows]) + '\n');
      io.out(ended.length === 0 ? 'no ended moves\n' : `\nrecently ended:\n${table([['PARTITION', 'KIND', 'MOVE', 'ENDED', 'OUTCOME'], ...ended.map(endedRow)])}\n`);
      io.out(`\n${readFromLine(from, 'moves')}\n`);
    });
}
