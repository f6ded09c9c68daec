import type { Command } from 'commander';
import type { MoveStatus } from '../../rules/definitions';
import { cancelMove } from '../../operations/moves';
import { auditedReason, defineCommand, parseId, print, withConnection, type CommandDeps } from '../output';

/** What an accepted cancel undoes: a handoff reopens admission on the owner; every other kind drops its learner. */
function undone(s: MoveStatus): string {
  const handoff = s.kind === 'owner-handoff' || (s.kind === 'owner-move' && s.stage === 'handoff');
  return handoff ? `admission reopens on the owner ${s.from}` : `the learner ${s.to} will be dropped`;
}

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'cancel', {
    description:
      'cancel the reconfiguration of a partition: before its point of no return it is undone (a learner is dropped, a ' +
      'handoff reopens admission on the owner); after it (the swap, a handoff\'s commit), refused with the way on',
    examples: ['rebalancer cancel q-3 --reason "wrong target, n5 is being retired"'],
    action: { defaultReason: 'cancelled by an operator' },
  })
    .argument('<partition>', 'partition id')
    .action(async (partitionArg: string, opts: { reason: string; json?: boolean }) => {
      const partition = parseId('partition', partitionArg);
      const reason = auditedReason({ command: 'cancel', target: partition, reason: opts.reason });
      await withConnection(deps, async (ctx) => {
        const s = await cancelMove(ctx.client, partition, reason);
        print(deps.io, opts.json, s, () => `cancel accepted for ${partition} (${s.kind}): ${undone(s)}`);
      });
    });
}
