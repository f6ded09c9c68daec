/**
 * `rebalancer plan`: the dry run. What the loop starts on its next tick and every step to convergence, in order,
 * with the spread before and after and the predicted time under the transfer limits; from the running broker (with
 * the loop's live cooldowns, moves in flight and pause state when it answers) or a saved `GET /v1/topology` body.
 * Changes nothing; without a Temporal server it plans on the broker's view alone and says so.
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { ClusterClient } from '../../cluster/client';
import type { Topology, Transfer } from '../../cluster/contract';
import { bandWords, checkSnapshot, type PlannerConfig } from '../../planner';
import { loadEnv, rebalancerSettings } from '../../worker/config';
import type { RebalancerStatus } from '../../rules/definitions';
import { formatBytes } from '../../rules/format';
import { withCooledMoves } from '../../operations/closed';
import { dryRun, sameStep, type DryRun } from '../../operations/dry-run';
import { defineCommand, print, table, Unreachable, usageError, type CommandDeps } from '../output';
import { rebalancerStatus } from '../../operations/rebalancer';
import { loopScope } from './pause';

function readSnapshot(file: string): Topology {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw usageError(`invalid --snapshot "${file}": cannot read it (${(err as Error).message})`);
  }
  const checked = checkSnapshot(text);
  if (!checked.ok) throw usageError(`invalid --snapshot "${file}": ${checked.problem}`);
  return checked.topology;
}

async function readBroker(): Promise<{ topology: Topology; transfers: Transfer[] }> {
  const env = loadEnv();
  const url = env.CLUSTER_URL ?? `http://127.0.0.1:${env.CLUSTER_PORT}`;
  const broker = new ClusterClient(url, { token: env.CLUSTER_TOKEN });
  const [topology, budget] = await Promise.all([broker.topology(), broker.syncBudget()]).catch((err: unknown) => {
    throw new Unreachable(`cannot read the topology from the broker at ${url} (${(err as Error).message}): is \`npm start\` running, or is CLUSTER_URL right?`);
  });
  return { topology, transfers: budget.transfers };
}

/** The live dry run: the loop's status when Temporal and the loop answer, else why not. */
async function planLive(deps: CommandDeps, config: PlannerConfig): Promise<DryRun> {
  const { topology, transfers } = await readBroker();
  let loop: RebalancerStatus | null = null;
  let why = 'no loop runs';
  try {
    const ctx = await deps.connect();
    try {
      loop = await withCooledMoves(ctx.client, ctx.taskQueue, await rebalancerStatus(ctx.client, loopScope(ctx)));
    } finally {
      await ctx.close();
    }
  } catch (err) {
    why = (err as Error).message;
  }
  return dryRun(topology, transfers, loop, config, loop ? Date.now() : topology.now, why);
}

const ms = (x: number): string => (x < 1000 ? `${Math.round(x)} ms` : `${(x / 1000).toFixed(1)} s`);

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'plan', {
    description:
      'dry run: the moves the planner would start now and every step to convergence, in order, with the spread before and after and the predicted time; changes nothing',
    examples: ['rebalancer plan', 'rebalancer plan --json', 'rebalancer plan --json --snapshot topology.json'],
  })
    .option('--snapshot <file>', 'plan on a saved topology (the JSON body of GET /v1/topology) instead of the running broker')
    .action(async (opts: { json?: boolean; snapshot?: string }) => {
      // The loop's own settings (REBALANCER_*), so the dry run shows what the loop would do.
      const config = rebalancerSettings(loadEnv()).planner;
      // A saved topology has no loop: moves in flight show as learners and leaving copies, which the planner leaves alone.
      const plan =
        opts.snapshot === undefined
          ? await planLive(deps, config)
          : (() => {
              const topology = readSnapshot(opts.snapshot);
              return dryRun(topology, [], null, config, topology.now, 'planned on a saved topology');
            })();
      print(deps.io, opts.json, plan, () => {
        const head = [
          `spread ${plan.spreadBefore.toFixed(3)} -> ${plan.spreadAfter.toFixed(3)} (mean ${plan.mean.toFixed(3)}, threshold ${plan.threshold})`,
          `${plan.steps.length} steps, ${plan.startNow} to start now; predicted ${ms(plan.predictedMs)}; planned in ${ms(plan.planningMs)}`,
          plan.loop.summary,
          ...(plan.dimensions ?? []).map((d) => `${d.inside ? 'inside' : 'OUTSIDE'} the ${d.dimension} band after the plan: worst ${bandWords(d)}`),
        ];
        if (plan.onResume.length > 0) head.push(`on a resume the loop starts ${plan.onResume.length} step(s): ${plan.onResume.map((s) => `${s.op} ${s.partition} ${s.from} -> ${s.to}`).join(', ')}`);
        if (plan.steps.length === 0) return [...head, `nothing to do: ${plan.idleReason ?? 'balanced'}`].join('\n');
        if (plan.startNow === 0 && plan.idleReason) head.push(`nothing starts now: ${plan.idleReason}`);
        const rows = plan.steps.map((s, i) => [String(i + 1), sameStep(plan.now, s) ? 'now' : '', s.op, s.partition, s.from, s.to, formatBytes(s.bytes), s.reason]);
        return [...head, table([['#', 'when', 'op', 'partition', 'from', 'to', 'bytes', 'reason'], ...rows])].join('\n');
      });
    });
}
