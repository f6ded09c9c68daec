import type { Command } from 'commander';
import { startReplace } from '../../operations/grow';
import { auditedReason, defineCommand, followMove, parseId, printStarted, withConnection, type CommandDeps } from '../output';
import { sayIfPinned } from './pin';

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'replace', {
    description: 'replace the lost follower L of a queue partition (its node is down) with a new copy on node T; L never has to come back',
    examples: ['rebalancer replace q-3 --lost n2 --with n6 --wait --reason "n2 lost its disk"'],
    action: { defaultReason: 'lost follower replaced by an operator' },
  })
    .argument('<partition>', 'queue partition id, e.g. q-3')
    .requiredOption('--lost <node>', 'L: the follower whose node is down')
    .requiredOption('--with <node>', 'T: the live node that receives the new copy')
    .option('--wait', 'wait until the replacement ends, printing its phase as it goes')
    .action(async (partitionArg: string, opts: { lost: string; with: string; wait?: boolean; json?: boolean; reason: string }) => {
      const partition = parseId('partition', partitionArg);
      const lost = parseId('node', opts.lost);
      const withNode = parseId('node', opts.with);
      const reason = auditedReason({ command: 'replace', target: partition, reason: opts.reason });
      await withConnection(deps, async (ctx) => {
        const handle = await startReplace({ ...ctx, cluster: await ctx.needBroker() }, { partition, lost, with: withNode, origin: 'operator', reason });
        await sayIfPinned(deps, ctx, partition, opts.json);
        if (opts.wait) return followMove(deps, handle, opts.json);
        printStarted(deps.io, opts.json, { workflowId: handle.workflowId, kind: 'replace', partition, from: lost, to: withNode });
      });
    });
}
