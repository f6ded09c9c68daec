import type { Command } from 'commander';
import { startFollowerMove } from '../moves';
import { defineCommand, followMove, parseId, printStarted, recordAction, withConnection, type CommandDeps } from '../output';

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'move', {
    description: 'move the follower copy of a queue partition from node R to node T without a fence',
    examples: ['rebalancer move q-3 --from n2 --to n5 --wait --reason "spread load off n2"'],
    action: { defaultReason: 'moved by an operator' },
  })
    .argument('<partition>', 'queue partition id, e.g. q-3')
    .requiredOption('--from <node>', 'R: the follower that gives up its copy')
    .requiredOption('--to <node>', 'T: the node that receives the copy')
    .option('--wait', 'wait until the move ends, printing its phase as it goes')
    .action(async (partitionArg: string, opts: { from: string; to: string; wait?: boolean; json?: boolean; reason: string }) => {
      const partition = parseId('partition', partitionArg);
      const from = parseId('node', opts.from);
      const to = parseId('node', opts.to);
      const reason = recordAction({ command: 'move', target: partition, reason: opts.reason });
      await withConnection(deps, async (ctx) => {
        const handle = await startFollowerMove({ ...ctx, cluster: await ctx.needBroker() }, { partition, from, to, origin: 'operator', reason });
        if (opts.wait) return followMove(deps, handle, opts.json);
        printStarted(deps.io, opts.json, { workflowId: handle.workflowId, kind: 'follower-move', partition, from, to });
      });
    });
}
