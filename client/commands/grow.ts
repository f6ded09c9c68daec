import type { Command } from 'commander';
import { startGrow } from '../../operations/grow';
import { auditedReason, defineCommand, followMove, parseId, printStarted, withConnection, type CommandDeps } from '../output';
import { sayIfPinned } from './pin';

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'grow', {
    description: 'raise the replication factor of a queue partition by one copy on node T (W changes only when T starts to count)',
    examples: ['rebalancer grow q-3 --to n5 --wait --reason "a fourth copy for the payments queue"'],
    action: { defaultReason: 'replication factor raised by an operator' },
  })
    .argument('<partition>', 'queue partition id, e.g. q-3')
    .requiredOption('--to <node>', 'T: the live node that receives the new copy')
    .option('--wait', 'wait until the increase ends, printing its phase as it goes')
    .action(async (partitionArg: string, opts: { to: string; wait?: boolean; json?: boolean; reason: string }) => {
      const partition = parseId('partition', partitionArg);
      const to = parseId('node', opts.to);
      const reason = auditedReason({ command: 'grow', target: partition, reason: opts.reason });
      await withConnection(deps, async (ctx) => {
        const handle = await startGrow({ ...ctx, cluster: await ctx.needBroker() }, { partition, to, origin: 'operator', reason });
        await sayIfPinned(deps, ctx, partition, opts.json);
        if (opts.wait) return followMove(deps, handle, opts.json);
        printStarted(deps.io, opts.json, { workflowId: handle.workflowId, kind: 'grow', partition, from: null, to });
      });
    });
}
