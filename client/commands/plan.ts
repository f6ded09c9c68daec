/**
 * `rebalancer plan`: the dry run. What the planner would start now and every step to convergence, in order, with
 * the spread before and after and the predicted time under the transfer limits; from the running broker or a
 * saved `GET /v1/topology` body. Needs no Temporal server and changes nothing.
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { ClusterClient } from '../../cluster/client';
import type { Topology } from '../../cluster/contract';
import { checkSnapshot, planNow, planToConvergence, type PlanInput } from '../../planner';
import { loadEnv, rebalancerSettings } from '../../worker/config';
import { formatBytes } from '../../workflows/format';
import { planHolds } from '../../workflows/rebalancer-rules';
import { loopStatusIfAny } from '../rebalancer';
import { defineCommand, print, table, Unreachable, usageError, withConnection, type CommandDeps } from '../output';
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

async function readBroker(): Promise<Topology> {
  const env = loadEnv();
  const url = env.CLUSTER_URL ?? `http://127.0.0.1:${env.CLUSTER_PORT}`;
  return new ClusterClient(url, { token: env.CLUSTER_TOKEN }).topology().catch((err: unknown) => {
    throw new Unreachable(`cannot read the topology from the broker at ${url} (${(err as Error).message}): is \`npm start\` running, or is CLUSTER_URL right?`);
  });
}

/** The running loop's pins and exclusions as the planner reads them; none when no loop or no Temporal answers. */
async function loopHolds(deps: CommandDeps): Promise<Pick<PlanInput, 'pinned' | 'excluded'>> {
  try {
    return await withConnection(deps, async (ctx) => {
      const loop = await loopStatusIfAny(ctx.client, loopScope(ctx));
      return loop ? planHolds(loop) : {};
    });
  } catch {
    return {};
  }
}

const ms = (x: number): string => (x < 1000 ? `${Math.round(x)} ms` : `${(x / 1000).toFixed(1)} s`);

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'plan', {
    description:
      'dry run: the moves the planner would start now and every step to convergence, in order, with the spread before and after and the predicted time; changes nothing',
    examples: ['rebalancer plan', 'rebalancer plan --json --snapshot topology.json'],
  })
    .option('--snapshot <file>', 'plan on a saved topology (the JSON body of GET /v1/topology) instead of the running broker')
    .action(async (opts: { json?: boolean; snapshot?: string }) => {
      // The loop's own settings (REBALANCER_*), so the dry run shows what the loop would do.
      const config = rebalancerSettings(loadEnv()).planner;
      const topology = opts.snapshot === undefined ? await readBroker() : readSnapshot(opts.snapshot);
      // The broker's view: moves in flight show as learners and leaving copies, which the planner leaves alone.
      // With the loop's pins and exclusions when it answers, so the dry run leaves alone what the loop would.
      const holds = opts.snapshot === undefined ? await loopHolds(deps) : {};
      const input: PlanInput = { topology, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: topology.now, ...holds };
      const plan = planToConvergence(input, config);
      const startNow = planNow(input, config).steps.length;
      print(deps.io, opts.json, { ...plan, startNow }, () => {
        const head = [
          `spread ${plan.spreadBefore.toFixed(3)} -> ${plan.spreadAfter.toFixed(3)} (mean ${plan.mean.toFixed(3)}, threshold ${plan.threshold})`,
          `${plan.steps.length} steps, ${startNow} to start now; predicted ${ms(plan.predictedMs)}; planned in ${ms(plan.planningMs)}`,
        ];
        if (plan.steps.length === 0) return [...head, `nothing to do: ${plan.idleReason ?? 'balanced'}`].join('\n');
        const rows = plan.steps.map((s, i) => [String(i + 1), i < startNow ? 'now' : '', s.op, s.partition, s.from, s.to, formatBytes(s.bytes), s.reason]);
        return [...head, table([['#', 'when', 'op', 'partition', 'from', 'to', 'bytes', 'reason'], ...rows])].join('\n');
      });
    });
}
