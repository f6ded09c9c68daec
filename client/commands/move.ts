import type { Command } from 'commander';
import { startMoveFrom } from '../../operations/handoff';
import { MoveRefused } from '../../operations/moves';
import { auditedReason, defineCommand, followMove, parseId, printStarted, withConnection, type CommandDeps } from '../output';
import { sayIfPinned } from './pin';

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'move', {
    description:
      'move a copy of a queue partition from node R to node T without a fence: a follower move, or an owner move when ' +
      'R is the owner (a follower\'s copy moves to T first, then a planned handoff makes T the owner)',
    examples: ['rebalancer move q-3 --from n2 --to n5 --wait --reason "spread load off n2"'],
    action: { defaultReason: 'moved by an operator' },
  })
    .argument('<partition>', 'queue partition id, e.g. q-3')
    .requiredOption('--from <node>', 'R: the follower that gives up its copy, or the owner that gives up its role')
    .requiredOption('--to <node>', 'T: the node that receives the copy')
    .option('--via <node>', 'owner move: the follower whose copy moves to T first (picked, and named, when absent)')
    .option('--wait', 'wait until the move ends, printing its phase as it goes')
    .action(async (partitionArg: string, opts: { from: string; to: string; via?: string; wait?: boolean; json?: boolean; reason: string }) => {
      const partition = parseId('partition', partitionArg);
      const from = parseId('node', opts.from);
      const to = parseId('node', opts.to);
      const via = opts.via === undefined ? undefined : parseId('node', opts.via);
      const reason = auditedReason({ command: 'move', target: partition, reason: opts.reason });
      await withConnection(deps, async (ctx) => {
        const cluster = await ctx.needBroker();
        if (via) {
          const owner = (await cluster.partition(partition).catch(() => null))?.partition.owner;
          if (owner && owner !== from) {
            throw new MoveRefused('not_an_owner_move', `--via ${via} applies to an owner move, but ${from} is not the owner of ${partition} (${owner} is): leave out --via to move the follower copy of ${from}`);
          }
        }
        const request = { partition, from, to, origin: 'operator' as const, reason, ...(via ? { via } : {}) };
        const { kind, handle } = await startMoveFrom({ ...ctx, cluster }, request);
        await sayIfPinned(deps, ctx, partition, opts.json);
        if (opts.wait) return followMove(deps, handle, opts.json);
        printStarted(deps.io, opts.json, { workflowId: handle.workflowId, kind, partition, from, to });
      });
    });
}
