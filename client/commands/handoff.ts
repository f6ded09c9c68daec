import type { Command } from 'commander';
import { startHandoff } from '../../operations/handoff';
import { outcomeOf } from '../../operations/moves';
import { auditedReason, defineCommand, followMove, parseId, positiveInt, printStarted, withConnection, type CommandDeps } from '../output';
import { sayIfPinned } from './pin';

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'handoff', {
    description:
      'hand the owner role of a queue partition to D, an admitted, caught-up follower: at a quiet point the owner closes ' +
      'admission, every counted copy becomes durable at its final boundary, D is committed as owner at epoch + 1 and ' +
      'reopens admission; the old owner stays a follower',
    examples: ['rebalancer handoff q-3 --to n2 --wait --reason "n1 carries the most owned partitions"'],
    action: { defaultReason: 'handed off by an operator' },
  })
    .argument('<partition>', 'queue partition id, e.g. q-3')
    .requiredOption('--to <node>', 'D: the follower that becomes owner')
    .option('--max-in-flight <n>', 'quiet point: close admission once at most this many messages are published but unconfirmed', (v) => positiveInt('--max-in-flight', v))
    .option('--max-wait <seconds>', 'wait at most this long for a quiet point, then close admission anyway', (v) => positiveInt('--max-wait', v))
    .option('--wait', 'wait until the handoff ends, printing its phase as it goes')
    .action(async (partitionArg: string, opts: { to: string; maxInFlight?: number; maxWait?: number; wait?: boolean; json?: boolean; reason: string }) => {
      const partition = parseId('partition', partitionArg);
      const to = parseId('node', opts.to);
      const reason = auditedReason({ command: 'handoff', target: partition, reason: opts.reason });
      const quietPoint = {
        ...(opts.maxInFlight !== undefined ? { maxInFlight: opts.maxInFlight } : {}),
        ...(opts.maxWait !== undefined ? { maxWaitMs: opts.maxWait * 1000 } : {}),
      };
      await withConnection(deps, async (ctx) => {
        const cluster = await ctx.needBroker();
        // A: the owner as the broker says now; the workflow ends if another node owns it by the time it runs.
        const from = (await cluster.partition(partition).catch(() => null))?.partition.owner ?? to;
        const handle = await startHandoff({ ...ctx, cluster }, { partition, from, to, origin: 'operator', reason, quietPoint });
        await sayIfPinned(deps, ctx, partition, opts.json);
        if (!opts.wait) return printStarted(deps.io, opts.json, { workflowId: handle.workflowId, kind: 'owner-handoff', partition, from, to });
        await followMove(deps, handle, opts.json);
        const outcome = await outcomeOf(handle);
        if (!opts.json && outcome?.status === 'completed') {
          deps.io.out(`admission was closed ${outcome.admissionClosedMs} ms; final boundary ${outcome.finalBoundary}${outcome.note ? `; ${outcome.note}` : ''}\n`);
        }
      });
    });
}
