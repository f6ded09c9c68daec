import type { Command } from 'commander';
import { cancelMove } from '../moves';
import { defineCommand, parseId, print, recordAction, withConnection, type CommandDeps } from '../output';

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'cancel', {
    description: 'cancel the reconfiguration of a partition: before the swap the learner is dropped; after it, refused',
    examples: ['rebalancer cancel q-3 --reason "wrong target, n5 is being retired"'],
    action: { defaultReason: 'cancelled by an operator' },
  })
    .argument('<partition>', 'partition id')
    .action(async (partitionArg: string, opts: { reason: string; json?: boolean }) => {
      const partition = parseId('partition', partitionArg);
      const reason = recordAction({ command: 'cancel', target: partition, reason: opts.reason });
      await withConnection(deps, async (ctx) => {
        const s = await cancelMove(ctx.client, partition, reason);
        print(deps.io, opts.json, s, () => `cancel accepted for ${partition}: the learner ${s.to} will be dropped`);
      });
    });
}
