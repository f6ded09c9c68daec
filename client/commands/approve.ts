/**
 * `rebalancer approve`: propose mode's approval (REBALANCER_MODE=propose). `approve <plan-id>` starts exactly the
 * pending plan's steps, refusing the stale ones with why; `approve --refresh` asks the loop for a fresh plan,
 * superseding the pending one. Both are actions on the loop (audited, --reason required), which is why the
 * refresh lives here and not in `rebalancer plan`, the dry run that changes nothing.
 */
import os from 'node:os';
import type { Command } from 'commander';
import type { ProposedPlan, StaleStep } from '../../rules/definitions';
import { formatBytes } from '../../rules/format';
import { approvePlan, refreshPlan } from '../../operations/rebalancer';
import { auditedReason, defineCommand, EXIT, moveLabel, print, table, usageError, withConnection, type CommandDeps } from '../output';
import { loopScope } from './pause';

const PLAN_ID = /^p-[0-9a-f]{8}$/;

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** A pending plan for people: its id, when and on which generation it was made, its steps, bytes and time. */
export function planLines(plan: ProposedPlan): string[] {
  const rows = plan.steps.map((s, i) => [String(i + 1), s.op, s.partition, moveLabel(s.from, s.to), formatBytes(s.bytes), s.reason]);
  return [
    `plan ${plan.id}: made at ${new Date(plan.madeAt).toISOString()} on generation ${plan.generation}; ${plan.steps.length} step(s), ${formatBytes(plan.bytes)}, predicted ${seconds(plan.predictedMs)}` +
      (plan.beyond ? `; the first of ${plan.steps.length + plan.beyond} to convergence (the other ${plan.beyond} are proposed once these are done)` : ''),
    table([['#', 'OP', 'PARTITION', 'MOVE', 'BYTES', 'WHY'], ...rows]),
    `approve: rebalancer approve ${plan.id} --reason <why>   (or a fresh plan: rebalancer approve --refresh --reason <why>)`,
  ];
}

function staleLines(stale: StaleStep[]): string[] {
  if (stale.length === 0) return [];
  return [`refused as stale (${stale.length}):`, table(stale.map(({ step, reason }) => [`  ${step.partition}`, step.op, moveLabel(step.from, step.to), reason]))];
}

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'approve', {
    description:
      'propose mode (REBALANCER_MODE=propose): start exactly the steps of the pending plan, under the transfer limits; a step whose ' +
      'partition or nodes changed since the plan was made is refused as stale, with why. --refresh asks for a fresh plan instead',
    examples: ['rebalancer approve p-3f2a9c1b --reason "reviewed, off-peak"', 'rebalancer approve --refresh --reason "n4 is back" --json'],
  })
    .argument('[plan-id]', 'the pending plan\'s id, as `rebalancer status` shows it')
    .option('--refresh', 'supersede the pending plan with a fresh one from the cluster as it is now')
    .requiredOption('--reason <text>', 'why: kept with the plan and in the audit log')
    .option('--by <name>', 'who approves (default: your user name)', os.userInfo().username)
    .action(async (planId: string | undefined, opts: { refresh?: boolean; reason: string; by: string; json?: boolean }) => {
      if (opts.refresh && planId !== undefined) throw usageError(`give a plan id or --refresh, not both (got "${planId}" and --refresh)`);
      if (!opts.refresh && planId === undefined) throw usageError('missing plan id: expected the pending plan\'s id (see `rebalancer status`), or --refresh');
      if (planId !== undefined && !PLAN_ID.test(planId)) throw usageError(`invalid plan id "${planId}": expected p- and 8 hex digits, for example p-3f2a9c1b`);
      const reason = auditedReason({ command: opts.refresh ? 'approve --refresh' : 'approve', target: planId ?? 'the rebalancer', reason: opts.reason });
      await withConnection(deps, async (ctx) => {
        if (opts.refresh) {
          const r = await refreshPlan(ctx.client, loopScope(ctx), { by: opts.by, reason });
          print(deps.io, opts.json, r, () =>
            [...(r.superseded ? [`superseded ${r.superseded}`] : []), ...(r.plan ? planLines(r.plan) : [`no plan: ${r.idleReason ?? 'the planner proposed nothing'}`])].join('\n'),
          );
          return;
        }
        const r = await approvePlan(ctx.client, loopScope(ctx), { planId: planId!, by: opts.by, reason });
        if (r.accepted.length === 0) deps.result.exitCode = EXIT.refused;
        print(deps.io, opts.json, r, () =>
          [`approved ${r.planId} by ${opts.by}: ${r.accepted.length} step(s) start under the transfer limits`, ...staleLines(r.stale)].join('\n'),
        );
      });
    });
}
