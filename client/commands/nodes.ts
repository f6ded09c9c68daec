/**
 * `rebalancer nodes`: every node's score vector as the rebalancer weighs it (operations/scores.ts, as the admin API
 * and the dashboard show it, moves in flight counted), with the cluster mean and the band outside which the
 * planner moves.
 */
import type { Command } from 'commander';
import { listMoves } from '../../operations/moves';
import { nodeScores, type ScoresView } from '../../operations/scores';
import { loadEnv, rebalancerSettings } from '../../worker/config';
import { defineCommand, print, table, withConnection, type CommandDeps } from '../output';

function describe(v: ScoresView): string {
  const n = (x: number) => x.toFixed(3);
  const rows = v.nodes.map((s) => {
    const state = [s.live ? 'up' : 'down', ...(s.draining ? ['draining'] : [])].join(', ');
    const where = s.total > v.upper ? 'above the band: sheds' : s.total < v.lower ? 'below the band: receives' : '';
    return [s.node, s.zone, String(s.capacity), state, n(s.owned), n(s.followed), n(s.history), n(s.traffic), n(s.sync), n(s.total), where];
  });
  return [
    table([['NODE', 'ZONE', 'CAPACITY', 'STATE', 'OWNED', 'FOLLOWED', 'HISTORY', 'TRAFFIC', 'SYNC', 'SCORE', ''], ...rows]),
    '',
    `mean ${n(v.mean)}, band ${n(v.lower)} to ${n(v.upper)}, spread ${n(v.spread)} (each dimension weighted as the rebalancer weighs it)`,
  ].join('\n');
}

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'nodes', {
    description: 'list every node with its score vector (owned, followed, history, traffic, sync), the cluster mean and the band outside which the rebalancer moves copies',
    examples: ['rebalancer nodes', 'rebalancer nodes --json'],
  }).action(async (opts: { json?: boolean }) => {
    const { planner } = rebalancerSettings(loadEnv());
    await withConnection(deps, async (ctx) => {
      const cluster = await ctx.needBroker();
      const [topology, moves] = await Promise.all([cluster.topology(), listMoves(ctx.client, ctx.taskQueue)]);
      const view = nodeScores(topology, moves, planner);
      print(deps.io, opts.json, view, () => describe(view));
    });
  });
}
