import os from 'node:os';
import type { Command } from 'commander';
import { relayScope } from '../../operations/relay';
import { setPaused } from '../../operations/rebalancer';
import { auditedReason, defineCommand, print, withConnection, type CommandDeps, type Connected } from '../output';

/** The loop of the broker and task queue the CLI is configured for. */
export function loopScope(ctx: Pick<Connected, 'cluster' | 'taskQueue'>): string {
  return relayScope(ctx.cluster.baseUrl, ctx.taskQueue);
}

/** `pause` and `resume`: both need --reason (no default: the loop keeps who stopped it and why). */
export function registerPauseOrResume(program: Command, deps: CommandDeps, paused: boolean): void {
  const name = paused ? 'pause' : 'resume';
  defineCommand(program, name, {
    description: paused
      ? 'pause the rebalancer: no new move starts (moves in flight go on); refused when paused already'
      : 'resume the rebalancer after a pause; refused when it runs',
    examples: [paused ? 'rebalancer pause --reason "disk upgrade on n3"' : 'rebalancer resume --reason "upgrade done"'],
  })
    .requiredOption('--reason <text>', 'why: kept in the rebalancer status')
    .option('--by <name>', 'who asks (default: your user name)', os.userInfo().username)
    .action(async (opts: { reason: string; by: string; json?: boolean }) => {
      const reason = auditedReason({ command: name, target: 'the rebalancer', reason: opts.reason });
      await withConnection(deps, async (ctx) => {
        const s = await setPaused(ctx.client, loopScope(ctx), paused, { by: opts.by, reason });
        print(deps.io, opts.json, s, () => (paused ? `paused by ${s.paused!.by}: ${s.paused!.reason}` : `resumed by ${s.lastResumed!.by}: ${s.lastResumed!.reason}`));
      });
    });
}

export function register(program: Command, deps: CommandDeps): void {
  registerPauseOrResume(program, deps, true);
}
