import type { Command } from 'commander';
import type { MoveStatus } from '../../rules/definitions';
import { formatBytes } from '../../rules/format';
import { showMove } from '../../operations/moves';
import { defineCommand, outcomeLine, parseId, withConnection, type CommandDeps } from '../output';

/** `label: value` lines with the values in one column, whatever the longest label; a null row is not shown. */
function fields(rows: ([string, string] | null)[]): string {
  const shown = rows.filter((row) => row !== null);
  const width = Math.max(...shown.map(([label]) => label.length)) + 2;
  return shown.map(([label, value]) => `${`${label}:`.padEnd(width)}${value}`).join('\n');
}

function describe(workflow: string, s: MoveStatus): string {
  return fields([
    ['workflow', workflow],
    ['partition', s.partition],
    ['move', `${s.kind} ${s.from ? `${s.from} -> ${s.to}` : `+${s.to}`} (${s.origin})`],
    ['phase', s.phase],
    ['bytes remaining', formatBytes(s.bytesRemaining)],
    ['boundary B', String(s.boundary ?? '-')],
    ['target durable', String(s.targetDurable ?? '-')],
    ['epoch', String(s.epoch ?? '-')],
    ['retries', String(s.retries)],
    ['blocked on', s.blockingReason ?? '-'],
    s.via ? ['via', `${s.via}${s.stage ? ` (stage ${s.stage})` : ''}`] : null,
    s.finalBoundary != null ? ['final boundary', String(s.finalBoundary)] : null,
    s.admissionClosedMs != null ? ['admission closed', `${s.admissionClosedMs} ms`] : null,
    s.outcome ? ['outcome', outcomeLine(s.outcome)] : null,
  ]);
}

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'show', {
    description: 'show the latest reconfiguration of a partition: phase, bytes remaining, boundary B, blocking reason, outcome',
    examples: ['rebalancer show q-3', 'rebalancer show q-3 --json'],
  })
    .argument('<partition>', 'partition id')
    .action(async (partitionArg: string, opts: { json?: boolean }) => {
      const partition = parseId('partition', partitionArg);
      await withConnection(deps, async (ctx) => {
        const detail = await showMove(ctx.client, partition, { topology: async () => (await ctx.needBroker()).topology(), baseUrl: ctx.cluster.baseUrl });
        const { io } = deps;
        if (opts.json) return io.out(JSON.stringify(detail) + '\n');
        const workflow = `${detail.workflowId} (${detail.running ? 'running' : 'ended'})`;
        if (detail.status) io.out(describe(workflow, detail.status) + '\n');
        else io.out(fields([['workflow', workflow], detail.outcome ? ['outcome', outcomeLine(detail.outcome)] : null]) + '\n');
      });
    });
}
