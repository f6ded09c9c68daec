import type { Command } from 'commander';
import type { MoveStatus } from '../../workflows/definitions';
import { formatBytes } from '../../workflows/format';
import { showMove } from '../moves';
import { defineCommand, outcomeLine, parseId, withConnection, type CommandDeps } from '../output';

function describe(s: MoveStatus): string {
  return [
    `partition:      ${s.partition}`,
    `move:           ${s.kind} ${s.from ? `${s.from} -> ${s.to}` : `+${s.to}`} (${s.origin})`,
    `phase:          ${s.phase}`,
    `bytes remaining: ${formatBytes(s.bytesRemaining)}`,
    `boundary B:     ${s.boundary ?? '-'}`,
    `target durable: ${s.targetDurable ?? '-'}`,
    `epoch:          ${s.epoch ?? '-'}`,
    `retries:        ${s.retries}`,
    `blocked on:     ${s.blockingReason ?? '-'}`,
    ...(s.via ? [`via:            ${s.via}${s.stage ? ` (stage ${s.stage})` : ''}`] : []),
    ...(s.finalBoundary != null ? [`final boundary: ${s.finalBoundary}`] : []),
    ...(s.admissionClosedMs != null ? [`admission closed: ${s.admissionClosedMs} ms`] : []),
    ...(s.outcome ? [`outcome:        ${outcomeLine(s.outcome)}`] : []),
  ].join('\n');
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
        io.out(`workflow:       ${detail.workflowId} (${detail.running ? 'running' : 'ended'})\n`);
        if (detail.status) io.out(describe(detail.status) + '\n');
        else if (detail.outcome) io.out(`outcome:        ${outcomeLine(detail.outcome)}\n`);
      });
    });
}
