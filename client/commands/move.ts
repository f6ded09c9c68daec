import type { Command } from 'commander';
import { startMoveFrom } from '../handoff';
import { defineCommand, followMove, parseId, printStarted, recordAction, withConnection, type CommandDeps } from '../output';

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'move', {
    description:
      'move the follower copy of a queue partition from node R to node T without a fence; with the owner as --from, ' +
      'an owner move: a follower\'s copy moves to T, then the owner hands off to T',
    examples: ['rebalancer move q-3 --from n2 --to n5 --wait --reason "spread load off n2"', 'rebalancer move q-3 --from n1 --to n6 --via n3 --wait'],
    action: { defaultReason: 'moved by an operator' },
  })
    .argument('<partition>', 'queue partition id, e.g. q-3')
    .requiredOption('--from <node>', 'R: the follower that gives up its copy, or the owner (an owner move)')
    .requiredOption('--to <node>', 'T: the node that receives the copy')
    .option('--via <node>', 'owner move: the follower whose copy moves to T first (chosen, with the reason, when absent)')
    .option('--wait', 'wait until the move ends, printing its phase as it goes')
    .action(async (partitionArg: string, opts: { from: string; to: string; via?: string; wait?: boolean; json?: boolean; reason: string }) => {
      const partition = parseId('partition', partitionArg);
      const from = parseId('node', opts.from);
      const to = parseId('node', opts.to);
      const via = opts.via === undefined ? undefined : parseId('node', opts.via);
      const reason = recordAction({ command: 'move', target: partition, reason: opts.reason });
      await withConnection(deps, async (ctx) => {
        const { kind, handle } = await startMoveFrom({ ...ctx, cluster: await ctx.needBroker() }, { partition, from, to, origin: 'operator', reason, ...(via ? { via } : {}) });
        if (opts.wait) return followMove(deps, handle, opts.json);
        printStarted(deps.io, opts.json, { workflowId: handle.workflowId, kind, partition, from, to });
      });
    });
}
