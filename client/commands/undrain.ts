import type { Command } from 'commander';
import { undrain } from '../../operations/rebalancer';
import { auditedReason, defineCommand, parseId, print, withConnection, type CommandDeps } from '../output';
import { drainOutcomeLine } from './drain';

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'undrain', {
    description: 'cancel the drain of a node (no new move starts, moves in flight end on their own) and clear its draining mark',
    examples: ['rebalancer undrain n3 --reason "rack 4 stays"'],
    action: { defaultReason: 'undrained by an operator' },
  })
    .argument('<node>', 'node id, e.g. n3')
    .action(async (nodeArg: string, opts: { json?: boolean; reason: string }) => {
      const node = parseId('node', nodeArg);
      const reason = auditedReason({ command: 'undrain', target: node, reason: opts.reason });
      await withConnection(deps, async (ctx) => {
        const outcome = await undrain({ client: ctx.client, cluster: await ctx.needBroker() }, node, reason);
        print(deps.io, opts.json, { node, draining: false, drain: outcome }, () => (outcome ? `${drainOutcomeLine(outcome)}; ${node} is no longer draining` : `${node} is no longer draining (no drain was running)`));
      });
    });
}
