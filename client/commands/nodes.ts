/**
 * `rebalancer nodes`: every node's score vector as the rebalancer weighs it (operations/scores.ts, as the admin API
 * and the dashboard show it, moves in flight counted), with the cluster mean and the band outside which the
 * planner moves.
 */
import type { Command } from 'commander';
import { listMoves } from '../../operations/moves';
import { nodeScores, type ScoresView } from '../../operations/scores';
import { shareDeviation } from '../../planner/bands';
import { DIMENSIONS, type Dimension, type NodeBand } from '../../planner/types';
import { loadEnv, rebalancerSettings } from '../../worker/config';
import { defineCommand, print, table, withConnection, type CommandDeps } from '../output';
import { nodesView, readFromLine, type ReadFrom } from '../views';

const MIB = 2 ** 20;

/** A node's load in one dimension against its band: "60 +10% above", the deviation from its share. */
function bandCell(d: Dimension, b: NodeBand): string {
  const load = d === 'disk' ? `${(b.load / MIB).toFixed(0)} MiB` : b.load.toFixed(Math.abs(b.load) >= 100 || d !== 'traffic' ? 0 : 1);
  const dev = shareDeviation(b);
  return `${load}${dev === null ? '' : ` ${dev}`}${b.inside ? '' : b.load > b.high ? ' above' : ' below'}`;
}

/** Each node's replicas, owned partitions, disk and traffic against its band, and each band's half width. */
function describeBands(v: ScoresView): string[] {
  const staying = v.nodes.filter((s) => s.bands !== null);
  if (staying.length === 0) return [];
  const rows = staying.map((s) => [s.node, ...DIMENSIONS.map((d) => bandCell(d, s.bands![d]))]);
  const widths = DIMENSIONS.map((d) => {
    const b = staying[0]!.bands![d];
    return `${d} ± ${b.share > 0 ? (((b.high - b.share) / b.share) * 100).toFixed(1) : '0'}%`;
  });
  const outside = staying.flatMap((s) => DIMENSIONS.filter((d) => !s.bands![d].inside).map((d) => `${s.node} ${d}`));
  return [
    '',
    table([['NODE', ...DIMENSIONS.map((d) => d.toUpperCase())], ...rows]),
    '',
    `each dimension against the node's share of the cluster's total by capacity, of what copies carry as its zone must hold (bands on ${staying[0]!.node}: ${widths.join(', ')}); ` +
      (outside.length === 0 ? 'every node inside every band' : `outside: ${outside.join(', ')}`),
  ];
}

/**
 * Where a node stands against the band, in words: a node the planner does not count (draining, down) receives
 * nothing, however low its score.
 */
function standing(s: ScoresView['nodes'][number], v: ScoresView): string {
  if (s.draining) return 'draining: receives nothing';
  if (!s.live) return 'down: receives nothing';
  return s.total > v.upper ? 'above the band: sheds' : s.total < v.lower ? 'below the band: receives' : '';
}

export function describeNodes(v: ScoresView, from: ReadFrom): string {
  const n = (x: number) => x.toFixed(3);
  const rows = v.nodes.map((s) => {
    const state = [s.live ? 'up' : 'down', ...(s.draining ? ['draining'] : [])].join(', ');
    const where = standing(s, v);
    return [s.node, s.zone, String(s.capacity), state, n(s.owned), n(s.followed), n(s.history), n(s.traffic), n(s.sync), n(s.total), where];
  });
  return [
    table([['NODE', 'ZONE', 'CAPACITY', 'STATE', 'OWNED', 'FOLLOWED', 'HISTORY', 'TRAFFIC', 'SYNC', 'SCORE', ''], ...rows]),
    '',
    `mean ${n(v.mean)}, band ${n(v.lower)} to ${n(v.upper)}, spread ${n(v.spread)} (each dimension weighted as the rebalancer weighs it)`,
    ...describeBands(v),
    '',
    readFromLine(from),
  ].join('\n');
}

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'nodes', {
    description:
      'list every node with its score vector (owned, followed, history, traffic, sync), the cluster mean and the band outside which the rebalancer moves copies, then its replicas, owned partitions, disk and traffic against their bands; read through the admin service when it runs for this broker (ADMIN_URL), else from the broker whole',
    examples: ['rebalancer nodes', 'rebalancer nodes --json'],
  }).action(async (opts: { json?: boolean }) => {
    const { view, from } = await nodesView(async (topology) => {
      const { planner } = rebalancerSettings(loadEnv());
      const moves = await withConnection(deps, (ctx) => listMoves(ctx.client, ctx.taskQueue));
      return nodeScores(topology, moves, planner);
    });
    print(deps.io, opts.json, { ...view, readFrom: from }, () => describeNodes(view, from));
  });
}
