/**
 * What the planner reads and what it proposes: the shared vocabulary of planner/ (pure code), the rebalancer
 * workflow, drain, `rebalancer plan` and the admin API. Pure types, safe in the workflow sandbox.
 */
import type { Partition, Topology } from '../cluster/contract';

/** Weights of the note's score dimensions; each dimension is divided by the node's capacity first. */
export interface ScoreWeights {
  owned: number;
  followed: number;
  history: number;
  traffic: number;
  sync: number;
}

export interface PlannerConfig {
  weights: ScoreWeights;
  /** k of the history weight h / (h + k), in bytes. */
  historyHalfBytes: number;
  /** Shed only above mean + threshold, only toward nodes below mean - threshold (score units). */
  threshold: number;
  /**
   * Per dimension (replicas, owned, disk, traffic), half the band around each node's share as a fraction of it;
   * absent ones take DEFAULT_BANDS (a loop started before bands existed has none).
   */
  bands?: Partial<Bands>;
  /** A move must lower the spread by at least this much (score units). */
  minImprovement: number;
  /** Hard limits on concurrent transfers (moves in flight), separate from the score. */
  maxTransfersPerNode: number;
  maxTransfersPerCluster: number;
  /**
   * A node that just received copies is not judged overloaded (never a source, except when draining) this long;
   * a partition just moved keeps its copy off the node it left and on the node it arrived on this long (see
   * `CooledMove`). The rebalancer sets `PlanInput.cooldowns` from them.
   */
  nodeCooldownMs: number;
  partitionCooldownMs: number;
  /** Bytes per second one node receives (shared by its transfers): the predicted time of a plan. */
  syncBytesPerSec: number;
  /**
   * A follower copy whose node has been down this long (broker clock, `Node.downSince`) is lost for good and
   * replaced; one whose node is down with its disk lost is replaced at once. 0 turns repair off.
   */
  replaceAfterMs: number;
}

/** A reconfiguration in flight, counted by its influence: bytes still to copy, load arriving at `to` and leaving `from`. */
export interface InFlightMove {
  partition: string;
  op: ProposalOp;
  from: string | null;
  to: string;
  bytesRemaining: number;
}

/**
 * A completed reconfiguration of a partition whose cooldown still runs: the node its copy (for a handoff, the owner
 * role) left and the node it arrived on. Until `until`, no step moves a copy of the partition back onto `from` nor
 * off `to`, so ownership is not handed back either; handing ownership to `to` stays allowed (the second half of
 * the same rebalance).
 */
export interface CooledMove {
  /** Null when no copy left a node (a replication increase). */
  from: string | null;
  to: string;
  until: number;
}

/** Epoch ms until which each cooldown runs (absent: not cooling down). */
export interface Cooldowns {
  /** A node that just received copies is never the source of a balancing move. */
  nodes: Record<string, number>;
  /** A partition not touched at all: one another drain holds, or an entry from an older run of the loop. */
  partitions: Record<string, number>;
  /** The partition cooldowns of completed reconfigurations, by partition; absent in a state from an older run. */
  moves?: Record<string, CooledMove[]>;
}

export interface PlanInput {
  topology: Topology;
  inFlight: InFlightMove[];
  cooldowns: Cooldowns;
  /** Planner clock, epoch ms (the workflow's or the caller's). */
  now: number;
  /** Nodes being drained: every copy leaves them, owners first by handoff. */
  draining?: string[];
  /**
   * Nodes marked draining whose drain another caller runs (the loop's plan beside a drain workflow): the copies on
   * them are that drain's to move, so this plan's drain step leaves them, and what that drain waits on is no reason
   * of this plan's. Their partitions come held (see planInputFor in rules/rebalancer-drain-rules.ts).
   */
  drainedElsewhere?: string[];
  /** Partitions an operator pinned, by id: never moved nor handed off (the loop passes its pins; a drain does not). */
  pinned?: Record<string, OperatorHold>;
  /** Nodes an operator excluded, by id: neither a source nor a receiver nor a handoff target. */
  excluded?: Record<string, OperatorHold>;
  /**
   * Plan repairs of lost copies (default true). A drain plans none: the loop starts them, and a repair the drain
   * would discard would still take one of its plan's transfer slots.
   */
  repair?: boolean;
}

/** Who pinned a partition or excluded a node, and why: the planner names them when they are what blocks. */
export interface OperatorHold {
  by: string;
  reason: string;
}

/** `follower_replace`: a lost follower copy (`from`, on a down node) replaced by a new one on `to`. */
export type ProposalOp = 'follower_move' | 'owner_handoff' | 'follower_replace';

/** The fields of the contract's partition record the load score reads besides the replicas. */
export type PartitionLoad = Pick<Partition, 'historyBytes' | 'publishRate' | 'deliveryRate' | 'retainedCopies'>;

export interface Proposal {
  op: ProposalOp;
  partition: string;
  from: string;
  to: string;
  /** Bytes the move copies (after a retained copy's durable offset when the target holds one). */
  bytes: number;
  /** Why, in words: which node sheds, which receives, the scores and the spread it improves. */
  reason: string;
}

/**
 * Per-node score vector. Each dimension is divided by the node's capacity and by its cluster mean per capacity,
 * then weighted (weights over owned..traffic sum to 1), so a node carrying exactly its share scores 1 in total;
 * `sync` (bytes of transfers to or from it, relative to the bytes a node holds on average) rides on top.
 */
export interface NodeScore {
  node: string;
  zone: string;
  capacity: number;
  live: boolean;
  draining: boolean;
  owned: number;
  followed: number;
  history: number;
  traffic: number;
  sync: number;
  total: number;
  /** Per dimension, the node's load against its band (bands.ts); null for a node that is down or draining, which has no share. */
  bands: Record<Dimension, NodeBand> | null;
}

export interface Plan {
  planningMs: number;
  steps: Proposal[];
  /** Largest |score - mean| over live nodes that are not draining, before and after the steps (sync excluded). */
  spreadBefore: number;
  spreadAfter: number;
  mean: number;
  threshold: number;
  /** Time to carry the steps out under the per-node and cluster transfer limits, at the nodes' sync rate. */
  predictedMs: number;
  /** Why the planner proposes nothing now, when it proposes nothing (recovery pending, within threshold, ...). */
  idleReason: string | null;
  /** After the steps: each dimension's worst node against its band (replicas, owned, disk, traffic). */
  dimensions?: DimensionReport[];
}

export const DIMENSIONS = ['replicas', 'owned', 'disk', 'traffic'] as const;
export type Dimension = (typeof DIMENSIONS)[number];
/**
 * The two parts of traffic the guard holds apart, each to the traffic band: the publishes every copy replicates,
 * which follower moves carry, and the deliveries the owner serves, which handoffs carry. Both inside the band puts
 * their sum inside it; a node filled to its traffic band by followers would have no room left for its owner roles.
 */
export type GuardDimension = 'publishes' | 'deliveries';
/** Half a band's width as a fraction of the node's share, per dimension. */
export type Bands = Record<Dimension, number>;

export interface Band {
  load: number;
  /** The node's share of the cluster's total by capacity, and the band around it. */
  share: number;
  low: number;
  high: number;
}

/** The worst node of each dimension among the nodes that stay: the one furthest outside its band, else nearest its edge. */
export interface DimensionReport extends NodeBand {
  dimension: Dimension;
  node: string;
  /** (load - share) / share: above 0 the node carries more than its share. */
  deviation: number;
  /** Half the band's width as a fraction of the share, its floor of one item included. */
  band: number;
}

/** A node's load against its band in one dimension, and whether it is inside. */
export interface NodeBand extends Band {
  inside: boolean;
}
