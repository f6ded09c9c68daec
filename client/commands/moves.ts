import type { Command } from 'commander';
import { formatBytes } from '../../workflows/format';
import { listMoves, recentMoves, type EndedMove } from '../moves';
import { defineCommand, moveLabel, outcomeLine, positiveInt, table, withConnection, type CommandDeps } from '../output';

function endedRow(m: EndedMove): string[] {
  const outcome = m.outcome ? outcomeLine(m.outcome) : m.executionStatus.toLowerCase();
  return [m.partition, m.kind ?? '-', moveLabel(m.from, m.to), m.closedAt ?? '-', outcome];
}

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'moves', {
    description: 'list every reconfiguration in progress (phase, bytes remaining, blocking reason) and the ones that ended most recently',
    examples: ['rebalancer moves --recent 20'],
  })
    .option('--recent <n>', 'how many ended moves to list', (v) => positiveInt('--recent', v), 10)
    .action(async (opts: { recent: number; json?: boolean }) => {
      await withConnection(deps, async (ctx) => {
        const { io } = deps;
        const [running, ended] = await Promise.all([listMoves(ctx.client), recentMoves(ctx.client, opts.recent)]);
        if (opts.json) return io.out(JSON.stringify({ running, ended }) + '\n');
        io.out(
          running.length === 0
            ? 'no moves in progress\n'
            : table([
                ['PARTITION', 'KIND', 'MOVE', 'PHASE', 'REMAINING', 'BOUNDARY', 'BLOCKED ON'],
                ...running.map((m) => [m.partition, m.kind, moveLabel(m.from, m.to), m.phase, formatBytes(m.bytesRemaining), String(m.boundary ?? '-'), m.blockingReason ?? '-']),
              ]) + '\n',
        );
        io.out(ended.length === 0 ? 'no ended moves\n' : `\nrecently ended:\n${table([['PARTITION', 'KIND', 'MOVE', 'ENDED', 'OUTCOME'], ...ended.map(endedRow)])}\n`);
      });
    });
}
