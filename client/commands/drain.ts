import os from 'node:os';
import type { Command } from 'commander';
import { drainStatusQuery, type DrainOutcome, type DrainStatus } from '../../rules/definitions';
import { formatBytes } from '../../rules/format';
import { drainNotice, drainOutcome, loopStatusIfAny, startDrain } from '../../operations/rebalancer';
import { auditedReason, defineCommand, EXIT, parseId, print, withConnection, type CommandDeps } from '../output';
import { loopScope } from './pause';
import { notice } from './pin';

export function drainOutcomeLine(o: DrainOutcome): string {
  if (o.status === 'completed') {
    if (!o.streamsLeft) return `completed: ${o.node} holds no copy (${o.moves} moves)`;
    const streams = o.streamsLeft.length > 0 ? `; stream copies left on it: ${o.streamsLeft.join(', ')}` : '';
    return `completed: ${o.node} holds no queue copy (${o.moves} moves)${streams}`;
  }
  return o.status === 'cancelled' ? `cancelled: ${o.reason} (${o.moves} moves)` : `refused (${o.code}): ${o.reason}`;
}

function progressLine(s: DrainStatus): string {
  const streams = s.queuesOnly && s.streamsLeft?.length ? `; stream copies staying: ${s.streamsLeft.join(', ')}` : '';
  const left = s.partitionsLeft === null ? '' : `: ${s.partitionsLeft} partition(s) left (${s.ownedLeft} owned), ${formatBytes(s.bytesLeft)}${streams}`;
  return `${s.phase}${left}${s.inFlight.length > 0 ? `, ${s.inFlight.length} move(s) in flight` : ''}${s.blockingReasons.length > 0 ? `; blocked: ${s.blockingReasons.join('; ')}` : ''}`;
}

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'drain', {
    description:
      'drain a node: mark it draining, hand off every partition it owns, then move every follower copy off it (targets chosen by the planner); ' +
      'refused for an unknown node, a node holding a stream copy (streams do not move yet; see --queues-only) or when the other nodes cannot hold every copy',
    examples: ['rebalancer drain n3 --wait --reason "decommission rack 4"', 'rebalancer drain n1 --queues-only --wait --reason "move the queues off n1"'],
    action: { defaultReason: 'drained by an operator' },
  })
    .argument('<node>', 'node id, e.g. n3')
    .option('--queues-only', 'move every queue copy off the node and leave its stream copies there; the drain ends listing them')
    .option('--wait', 'wait until the drain ends, printing its progress as it changes')
    .option('--by <name>', 'who asks (default: your user name)', os.userInfo().username)
    .action(async (nodeArg: string, opts: { wait?: boolean; queuesOnly?: boolean; json?: boolean; reason: string; by: string }) => {
      const node = parseId('node', nodeArg);
      const reason = auditedReason({ command: 'drain', target: node, reason: opts.reason });
      await withConnection(deps, async (ctx) => {
        const cluster = await ctx.needBroker();
        // Pins and exclusions hold the loop back, not a drain the operator asked for: the drain keeps the line in its status.
        const note = drainNotice(await loopStatusIfAny(ctx.client, loopScope(ctx)), await cluster.topology(), node);
        const handle = await startDrain({ ...ctx, cluster }, { node, by: opts.by, reason, ...(opts.queuesOnly ? { queuesOnly: true } : {}), ...(note ? { notice: note } : {}) });
        notice(deps, opts.json, note);
        if (!opts.wait) return print(deps.io, opts.json, { started: true, workflowId: handle.workflowId, node }, () => `started ${handle.workflowId}: draining ${node}`);
        const ended = handle.result().then(
          () => true,
          () => true,
        );
        let last = '';
        while (!(await Promise.race([ended, new Promise<false>((r) => setTimeout(() => r(false), 1000))]))) {
          const s = opts.json ? null : await handle.query(drainStatusQuery).catch(() => null);
          const line = s ? progressLine(s) : '';
          if (line && line !== last) deps.io.out(`${(last = line)}\n`);
        }
        const outcome = await drainOutcome(handle);
        if (!outcome) throw new Error(`${handle.workflowId} ended without an outcome`);
        print(deps.io, opts.json, outcome, () => drainOutcomeLine(outcome));
        if (outcome.status !== 'completed') deps.result.exitCode = EXIT.refused;
      });
    });
}
