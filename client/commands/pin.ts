/**
 * `pin <partition>` / `unpin <partition>` (and, through `registerHold`, `exclude` / `include` of a node): the
 * rebalancer loop proposes and starts nothing on a pinned partition, and moves no copy or ownership onto or off an
 * excluded node. Operators' own moves and drains go ahead. The id is checked against the broker first; the loop
 * keeps who and why, so --reason is required.
 */
import os from 'node:os';
import type { Command } from 'commander';
import type { RebalancerStatus } from '../../rules/definitions';
import type { HoldAction } from '../../rules/rebalancer-rules';
import { MoveRefused } from '../../operations/moves';
import { loopStatusIfAny, pinNotice, setHold, unknownId } from '../../operations/rebalancer';
import { auditedReason, defineCommand, parseId, print, withConnection, type CommandDeps, type Connected } from '../output';
import { loopScope } from './pause';

const SPECS: Record<HoldAction, { kind: 'partition' | 'node'; description: string; example: string; done: (id: string, s: RebalancerStatus) => string }> = {
  pin: {
    kind: 'partition',
    description: 'pin a partition: the rebalancer proposes and starts nothing on it (no follower move, no handoff) until unpinned; operators\' own moves and drains go ahead',
    example: 'rebalancer pin q-3 --reason "investigating slow consumers"',
    done: (id, s) => `pinned ${id} by ${s.pinned[id]!.by}: ${s.pinned[id]!.reason}; the rebalancer leaves it alone until \`rebalancer unpin ${id}\``,
  },
  unpin: {
    kind: 'partition',
    description: 'unpin a partition: the rebalancer may move it again; refused when it is not pinned',
    example: 'rebalancer unpin q-3 --reason "investigation done"',
    done: (id) => `unpinned ${id}: the rebalancer may move it again`,
  },
  exclude: {
    kind: 'node',
    description: 'exclude a node from rebalancing: the rebalancer moves no copy onto or off it and hands no ownership to or from it until included; a drain of it still runs',
    example: 'rebalancer exclude n3 --reason "burn-in of new disks"',
    done: (id, s) => `excluded ${id} by ${s.excluded[id]!.by}: ${s.excluded[id]!.reason}; the rebalancer leaves it alone until \`rebalancer include ${id}\``,
  },
  include: {
    kind: 'node',
    description: 'include a node in rebalancing again after an exclude; refused when it is not excluded',
    example: 'rebalancer include n3 --reason "burn-in done"',
    done: (id) => `included ${id}: the rebalancer may move copies onto and off it again`,
  },
};

/** A line for people, on stderr with --json (stdout stays one JSON object). */
export function notice(deps: CommandDeps, json: boolean | undefined, line: string | null): void {
  if (line) (json ? deps.io.err : deps.io.out)(line + '\n');
}

/** An operator's reconfiguration of a pinned partition goes ahead: one line says so. */
export async function sayIfPinned(deps: CommandDeps, ctx: Connected, partition: string, json: boolean | undefined): Promise<void> {
  notice(deps, json, pinNotice(await loopStatusIfAny(ctx.client, loopScope(ctx)), partition));
}

export function registerHold(program: Command, deps: CommandDeps, action: HoldAction): void {
  const spec = SPECS[action];
  defineCommand(program, action, { description: spec.description, examples: [spec.example, `rebalancer ${action} ${spec.kind === 'node' ? 'n3' : 'q-3'} --json --reason "..."`] })
    .argument(`<${spec.kind}>`, spec.kind === 'node' ? 'node id, e.g. n3' : 'partition id, e.g. q-3')
    .requiredOption('--reason <text>', 'why: kept in the rebalancer status and the audit log')
    .option('--by <name>', 'who asks (default: your user name)', os.userInfo().username)
    .action(async (idArg: string, opts: { reason: string; by: string; json?: boolean }) => {
      const id = parseId(spec.kind, idArg);
      const reason = auditedReason({ command: action, target: id, reason: opts.reason });
      await withConnection(deps, async (ctx) => {
        // Only a pin or an exclusion is checked: a hold on an id the broker no longer has can still be lifted.
        if (action === 'pin' || action === 'exclude') {
          const problem = unknownId(await (await ctx.needBroker()).topology(), spec.kind, id);
          if (problem) throw new MoveRefused(`unknown_${spec.kind}`, problem);
        }
        const s = await setHold(ctx.client, loopScope(ctx), action, id, { by: opts.by, reason });
        print(deps.io, opts.json, s, () => spec.done(id, s));
      });
    });
}

export function register(program: Command, deps: CommandDeps): void {
  registerHold(program, deps, 'pin');
  registerHold(program, deps, 'unpin');
}
