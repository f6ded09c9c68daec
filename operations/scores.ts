/**
 * Every node's score vector as the rebalancer weighs it, moves in flight counted, with the cluster mean and the
 * band outside which the planner moves copies: `rebalancer nodes`, the admin API and the dashboard show the same.
 */
import type { Topology, Transfer } from '../cluster/contract';
import { scoreNodes, type KeptReading } from '../planner';
import type { InFlightMove, NodeScore, PlanInput, PlannerConfig, ScoreWeights } from '../planner/types';
import type { MoveStatus } from '../rules/definitions';

/** The score vectors with the cluster mean and the two thresholds the planner sheds and receives at. */
export interface ScoresView {
  nodes: NodeScore[];
  weights: ScoreWeights;
  mean: number;
  /** Nodes above `upper` (mean + threshold) shed load, only toward nodes below `lower` (mean - threshold). */
  upper: number;
  lower: number;
  /** Largest |score - mean|. */
  spread: number;
}

/** Node ids in order as people count: n2 before n10 (the admin API's `sort=id`, the CLI's `nodes`). */
export const byNodeId = (a: { node: string }, b: { node: string }) => a.node.localeCompare(b.node, undefined, { numeric: true });

/** A move as the scores count it: the load it takes from `from` to `to`, and the bytes it still copies. */
export type ScoredMove = Pick<MoveStatus, 'partition' | 'kind' | 'from' | 'to' | 'bytesRemaining'>;

/**
 * Moves listed without their workflows' word, with the bytes each still copies as the broker's transfers say (the
 * transfer of the partition to its target): what the loop counts too, and ahead of what a workflow last reported.
 */
export function withTransferBytes(moves: readonly Omit<ScoredMove, 'bytesRemaining'>[], transfers: readonly Transfer[]): ScoredMove[] {
  const left = new Map<string, number>();
  for (const t of transfers) left.set(`${t.partition} ${t.node}`, (left.get(`${t.partition} ${t.node}`) ?? 0) + t.bytesRemaining);
  return moves.map(({ partition, kind, from, to }) => ({ partition, kind, from, to, bytesRemaining: left.get(`${partition} ${to}`) ?? null }));
}

/** Moves in flight as the planner counts them: bytes still to copy, load arriving at `to` and leaving `from`. */
function inFlight(moves: readonly ScoredMove[]): InFlightMove[] {
  return moves.map((m) => ({
    partition: m.partition,
    op: m.kind === 'owner-handoff' ? 'owner_handoff' : m.kind === 'replace' ? 'follower_replace' : 'follower_move',
    from: m.from,
    to: m.to,
    bytesRemaining: m.bytesRemaining ?? 0,
  }));
}

function planInput(topology: Topology, moves: readonly ScoredMove[]): PlanInput {
  return { topology, inFlight: inFlight(moves), cooldowns: { nodes: {}, partitions: {} }, now: topology.now, draining: topology.nodes.filter((n) => n.draining).map((n) => n.id) };
}

/** The scores; a long-lived caller (the admin service) keeps the planner's reading of the records (`kept`) between pages. */
export function nodeScores(topology: Topology, moves: readonly ScoredMove[], planner: PlannerConfig, kept?: KeptReading): ScoresView {
  const { mean, nodes } = scoreNodes(planInput(topology, moves), planner, kept);
  const spread = Math.max(0, ...nodes.filter((n) => n.live && !n.draining).map((n) => Math.abs(n.total - mean)));
  return { nodes, weights: planner.weights, mean, upper: mean + planner.threshold, lower: mean - planner.threshold, spread };
}
