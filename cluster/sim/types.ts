/**
 * Internal state of the reference cluster's simulation. Everything here is plain JSON so that a node or a
 * partition is one row in SQLite; the contract's shapes (cluster/contract.ts) are views derived from it.
 */
import type {
  Breach,
  ClusterEvent,
  DurabilityPolicy,
  GuardedWriteName,
  HistoryEntry,
  PendingRecovery,
  RetainedCopy,
  SwitchBoundary,
} from '../contract';

export interface SimConfig {
  seed: number;
  /** Simulated milliseconds per simulation step. */
  tickMs: number;
  replicationFactor: number;
  durability: DurabilityPolicy;
  /** Default publish rate of a new partition, messages per simulated second. */
  publishRate: number;
  /** Default message size of a new partition, bytes. */
  messageBytes: number;
  /** The owner truncates its log keeping this many messages; a learner below that copies a checkpoint. */
  retainMessages: number;
  /** Messages every partition starts with (so that learners start from a checkpoint). */
  initialMessages: number;
  /** Per node, shared among the node's transfers (learners and rejoining replicas), bytes per second. */
  transferBytesPerSec: number;
  /** Per node, shared among the node's following replicas, messages per second. */
  followMessagesPerSec: number;
  /** A replica within this many messages of the tail counts as caught up. */
  catchUpSlack: number;
  perNodeLimit: number;
  clusterLimit: number;
  recoveryDelayMs: number;
  retainGraceMs: number;
}

export const defaultConfig: SimConfig = {
  seed: 1,
  tickMs: 100,
  replicationFactor: 3,
  durability: { mode: 'majority_durable' },
  publishRate: 20,
  messageBytes: 1024,
  retainMessages: 50_000,
  initialMessages: 100_000,
  transferBytesPerSec: 4 * 1024 * 1024,
  followMessagesPerSec: 200_000,
  catchUpSlack: 100,
  perNodeLimit: 2,
  clusterLimit: 8,
  recoveryDelayMs: 2_000,
  retainGraceMs: 600_000,
};

/** What a test may set per partition when creating one; omitted: the cluster's configured defaults. */
export interface PartitionSettings {
  initialMessages?: number;
  publishRate?: number;
  messageBytes?: number;
}

export interface NodeState {
  id: string;
  processId: string;
  storageInstance: string;
  live: boolean;
  /** Broker clock when the node went down, null while live (the contract's Node.downSince). */
  downSince: number | null;
  capacity: number;
  zone: string;
  draining: boolean;
}

export interface Checkpoint {
  /** The owner's log start when the copy began: the replica is durable here once the copy is done. */
  offset: number;
  totalBytes: number;
  doneBytes: number;
}

export interface ReplicaState {
  durable: number;
  /** Transfer bytes left over from the last step (less than one message). */
  carry: number;
  ckpt: Checkpoint | null;
  /** A sync-budget slot held by this replica's transfer. */
  slot: 'recovery' | 'rebalance' | null;
  /** A rebalancing transfer that gave its slot to a waiting recovery transfer (not stalled: nothing is wrong). */
  pausedForRecovery: boolean;
  stalledSince: number | null;
}

export interface RetainedInternal extends Omit<RetainedCopy, 'bytesToCatchUp'> {
  /** Below this the retained data is confirmed, so a learner returning here may start from it. */
  safeOffset: number;
  storageInstance: string;
}

export interface LostCopy {
  node: string;
  durableAtLoss: number;
  at: number;
}

/**
 * A partition in the steady state (owner serving, all followers live and keeping up, nothing in flight) is
 * not stepped: its offsets follow from this anchor in closed form, which is what makes 10,000 partitions
 * cheap. Any change wakes it (de-anchors it) at the current time.
 */
export interface Anchor {
  at: number;
  tail: number;
  frac: number;
  followerBase: number;
  logStart: number;
  confirmed: number;
}

export interface PartitionState {
  id: string;
  /** Creation order: partitions are stepped in this order, so a run does not depend on wake order. */
  ord: number;
  kind: 'queue' | 'stream';
  owner: string;
  followers: string[];
  learners: string[];
  leaving: string | null;
  epoch: number;
  generation: number;
  replicationFactor: number;
  durability: DurabilityPolicy;
  writeRequirement: number;
  history: HistoryEntry[];
  pendingRecovery: PendingRecovery | null;
  admission: 'open' | 'closed';
  boundary: SwitchBoundary | null;
  retainedCopies: RetainedInternal[];

  publishRate: number;
  messageBytes: number;
  tail: number;
  /** Fraction of a message accumulated by the publish rate. */
  frac: number;
  /** The owner's tail before the last step's appends: followers replicate up to it (one step of lag). */
  prevTail: number;
  /** Publishes waiting for the owner (admission closed, pending recovery). */
  waiting: number;
  confirmedTail: number;
  logStart: number;
  finalBoundary: number | null;
  replicas: Record<string, ReplicaState>;
  /** Closed confirm segments: messages below upTo (and above the previous segment) were confirmed under w. */
  segments: { upTo: number; w: number }[];
  lostCopies: LostCopy[];
  /** Nodes whose transfer for this partition is stalled by a fault. */
  stalled: string[];
  /** Signature of the last progress event, so one is emitted only when something changed. */
  lastProgressSig: string;
  anchor: Anchor | null;
  /**
   * The coordination generation of this record's last change (GET /v1/topology/changes); absent in a record an
   * older cluster stored, which has not changed since this process started.
   */
  changedAt?: number;
}

export interface StoredEvent {
  event: ClusterEvent;
  /** Simulated time from which the event is readable (delay-events). */
  visibleAt: number;
}

export interface Injection {
  partition?: string;
  write?: GuardedWriteName;
}

export interface SimMeta {
  config: SimConfig;
  now: number;
  lastSeq: number;
  generation: number;
  prng: number;
  checks: number;
  injections: Injection[];
  delayUntil: number;
  dropCount: number;
}

export interface SimSnapshot {
  meta: SimMeta;
  nodes: NodeState[];
  partitions: PartitionState[];
  breaches: Breach[];
}

/** What changed since the last takeChanges(): persisted as one transaction. */
export interface SimChanges {
  meta: SimMeta;
  nodes: NodeState[];
  partitions: PartitionState[];
  events: StoredEvent[];
  breaches: Breach[];
}

export function newReplica(durable: number): ReplicaState {
  return { durable, carry: 0, ckpt: null, slot: null, pausedForRecovery: false, stalledSince: null };
}
