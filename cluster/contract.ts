/**
 * The broker contract: what this project needs from a broker to move replicas live, as zod schemas.
 * TypeScript types are inferred from these schemas and the OpenAPI document (cluster/openapi.ts) is
 * generated from them, so the three never drift apart. Words follow the design note: owner, follower,
 * learner, leaving, boundary, eligible set (the accepted history), write requirement W, sync budget,
 * pending recovery.
 */
import { z } from 'zod';

export const CONTRACT_VERSION = '1';

const count = z.int().min(0).max(Number.MAX_SAFE_INTEGER);
/** The id patterns, shared with the snapshot check's path without zod (planner/snapshot.ts). */
export const NODE_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
export const PARTITION_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
export const NodeId = z
  .string()
  .regex(NODE_ID_PATTERN, 'a node id: 1-63 of a-z, 0-9, "-", "_", starting with a letter or digit');
export type NodeId = z.infer<typeof NodeId>;
export const PartitionId = z
  .string()
  .regex(PARTITION_ID_PATTERN, 'a partition id: 1-128 of A-Z, a-z, 0-9, ".", "_", "-"');
export type PartitionId = z.infer<typeof PartitionId>;
/** Offsets count messages: a replica durable at offset d holds messages 0 .. d-1. */
export const Offset = count;

// ---------------------------------------------------------------- reads: topology

export const Node = z.object({
  id: NodeId,
  /** Changes on every restart: the accepted history binds a replica to one process. */
  processId: z.string(),
  /** Changes when the disk is lost: the accepted history binds a replica to one storage instance. */
  storageInstance: z.string(),
  live: z.boolean(),
  /**
   * Broker clock (the topology's `now`) when the node was last seen going down; null while it is live. The
   * broker is the authority on liveness, so how long a node has been down is read here, never timed by a client
   * from when it noticed. Absent from a broker that predates it: read as null.
   */
  downSince: count.nullable().default(null),
  /** Relative capacity, 1 = a standard node; load score dimensions are divided by it. */
  capacity: z.number().positive().max(1000),
  zone: z.string(),
  /** Messages per second, from heartbeat labels: advisory only. */
  publishRate: z.number().min(0),
  deliveryRate: z.number().min(0),
  draining: z.boolean(),
});
export type Node = z.infer<typeof Node>;

export const DurabilityPolicy = z.discriminatedUnion('mode', [
  z.object({ mode: z.literal('majority_durable') }),
  z.object({ mode: z.literal('replica_durable'), n: z.int().min(1).max(16) }),
  z.object({ mode: z.literal('replica_accepted'), n: z.int().min(1).max(16) }),
  z.object({ mode: z.literal('local_durable') }),
]);
export type DurabilityPolicy = z.infer<typeof DurabilityPolicy>;

/** W, from the configured replication factor and the policy, never from the copies assigned right now. */
export function writeRequirement(policy: DurabilityPolicy, replicationFactor: number): number {
  switch (policy.mode) {
    case 'local_durable':
      return 1;
    case 'replica_durable':
    case 'replica_accepted':
      return Math.min(policy.n, replicationFactor);
    case 'majority_durable':
      return Math.floor(replicationFactor / 2) + 1;
  }
}

/** One member of the accepted history: the eligible recovery set is the history's replicas. */
export const HistoryEntry = z.object({
  node: NodeId,
  processId: z.string(),
  storageInstance: z.string(),
  /** A restarted follower, kept in its eligible-set slot until learner admission takes it back. */
  suspended: z.boolean(),
});
export type HistoryEntry = z.infer<typeof HistoryEntry>;

export const PendingRecovery = z.object({
  /** The epoch that failed; activation publishes epoch + 1. */
  epoch: count,
  openedAt: count,
  reason: z.string(),
  failedOwner: NodeId,
});
export type PendingRecovery = z.infer<typeof PendingRecovery>;

export const RetainedCopy = z.object({
  node: NodeId,
  durableOffset: Offset,
  removedAt: count,
  retainedUntil: count,
  /**
   * Bytes a learner added on this node would copy now: the messages after the offset the copy restarts from
   * (its durable offset, cut back to what was confirmed when it was removed), or the whole history
   * (historyBytes) when the owner has truncated past that offset.
   */
  bytesToCatchUp: count,
});
export type RetainedCopy = z.infer<typeof RetainedCopy>;

/**
 * The switch boundary B, recorded by the swap: the owner's confirmed tail when it switched sets. After a swap
 * back (docs/operations/follower-move.md, "Swap back when T is lost after the swap") it is B', `joined` is R
 * counting again and `leaving` is T.
 */
export const SwitchBoundary = z.object({
  offset: Offset,
  joined: NodeId,
  leaving: NodeId,
  epoch: count,
  /** Set by a swap back: the leaving replica is the one that had joined in the joined replica's place. */
  swappedBack: z.boolean().optional(),
});
export type SwitchBoundary = z.infer<typeof SwitchBoundary>;

export const Partition = z.object({
  id: PartitionId,
  kind: z.enum(['queue', 'stream']),
  owner: NodeId,
  /** Counted copies besides the owner (suspended ones do not count until re-admitted). */
  followers: z.array(NodeId),
  /** Replicate from the owner, never count toward a confirm, never change W. */
  learners: z.array(NodeId),
  /** The follower a swap stopped counting: no longer in followers, still replicating and eligible until removed. */
  leaving: NodeId.nullable(),
  epoch: count,
  /** This partition's record version: every guarded write names the one it expects. */
  generation: count,
  replicationFactor: z.int().min(1).max(16),
  durability: DurabilityPolicy,
  /** W, derived from replicationFactor and durability. */
  writeRequirement: z.int().min(1).max(16),
  history: z.array(HistoryEntry),
  pendingRecovery: PendingRecovery.nullable(),
  /** Closed by the owner for a planned handoff; publishes wait while it is closed. */
  admission: z.enum(['open', 'closed']),
  boundary: SwitchBoundary.nullable(),
  retainedCopies: z.array(RetainedCopy),
  /** The owner's retained history in bytes (its log after truncation): what a new learner copies. */
  historyBytes: count,
  /** Messages per second the owner appends now (0 while it does not serve); advisory, like the node rates. */
  publishRate: z.number().min(0),
  /** Messages per second delivered to consumers now; a node's rates are the sums over the partitions it owns. */
  deliveryRate: z.number().min(0),
});
export type Partition = z.infer<typeof Partition>;

export const Topology = z.object({
  contractVersion: z.string(),
  /** Coordination generation: rises with every change to any record. */
  generation: count,
  now: count,
  nodes: z.array(Node),
  partitions: z.array(Partition),
});
export type Topology = z.infer<typeof Topology>;

/**
 * GET /v1/topology/changes?after=G: what changed since coordination generation G, so a reader that holds the
 * topology at G keeps it current without reading every partition again. Every node comes (they are few), with
 * the partition records whose assignment changed after G (any field a write, a recovery, a restart, a disk loss
 * or a retained copy's expiry sets) and the ids of those deleted after G. Records that did not change keep the
 * advisory figures (historyBytes, rates, bytesToCatchUp) the reader last saw: a full read refreshes them. A broker
 * that no longer knows what changed since G (it restarted, or G is ahead of it) answers 410: read the whole
 * topology.
 */
export const TopologyChangesQuery = z.object({ after: z.coerce.number().pipe(count) }).strict();
export const TopologyChanges = z.object({
  contractVersion: z.string(),
  /** The generation these changes bring the reader to: pass it as `after` next time. */
  generation: count,
  now: count,
  nodes: z.array(Node),
  partitions: z.array(Partition),
  /** Partitions deleted after G. */
  removed: z.array(PartitionId),
});
export type TopologyChanges = z.infer<typeof TopologyChanges>;

/**
 * GET /v1/topology/page?after=ID&limit=N (optional: 404 from a broker without it): the partition records whose ids
 * sort after `after` (from the first when it is absent), in ascending code-unit order of their ids, at most `limit`
 * of them (1 to 10,000, default 1,000), with every node at the page's generation. `next` is the last id of the page
 * when more follow (pass it as `after`), null on the last page. Each page is one coordination generation; the pages
 * of one pass may be at different ones, which the changes read reconciles. What a reader checks its model with, a
 * page at a time, where the whole read would hold the broker and the reader for a second at 100,000 partitions (and
 * cannot be one string past about 860,000).
 */
export const TOPOLOGY_PAGE_MAX = 10_000;
export const TopologyPageQuery = z
  .object({ after: PartitionId.optional(), limit: z.coerce.number().pipe(z.int().min(1).max(TOPOLOGY_PAGE_MAX)).optional() })
  .strict();
export const TopologyPage = z.object({
  contractVersion: z.string(),
  generation: count,
  now: count,
  nodes: z.array(Node),
  partitions: z.array(Partition),
  next: PartitionId.nullable(),
});
export type TopologyPage = z.infer<typeof TopologyPage>;

/** Just the nodes: what a move checks, without the cost of every partition record. */
export const NodesView = z.object({ generation: count, now: count, nodes: z.array(Node) });
export type NodesView = z.infer<typeof NodesView>;

// ---------------------------------------------------------------- reads: progress and sync budget

export const ReplicaRole = z.enum(['owner', 'follower', 'leaving', 'learner']);
export type ReplicaRole = z.infer<typeof ReplicaRole>;

export const ReplicaProgress = z.object({
  node: NodeId,
  role: ReplicaRole,
  durableOffset: Offset,
  live: z.boolean(),
  /** In the accepted history (eligible). */
  admitted: z.boolean(),
  suspended: z.boolean(),
  /** Bytes still to copy before this replica is caught up (0 for caught-up replicas). */
  bytesRemaining: count,
  /** Where a catching-up replica is: copying a checkpoint, following the log tail, or caught up. */
  phase: z.enum(['checkpoint', 'tail', 'caught_up']),
  /** Set when the transfer to this replica made no progress since this time (simulated ms). */
  stalledSince: count.nullable(),
  /**
   * A rebalancing transfer that gave its slot to a waiting recovery transfer ("recovery always takes priority
   * over rebalancing"): it makes no progress until recovery no longer waits, and is not stalled.
   */
  pausedForRecovery: z.boolean().default(false),
});
export type ReplicaProgress = z.infer<typeof ReplicaProgress>;

export const Progress = z.object({
  partition: PartitionId,
  generation: count,
  epoch: count,
  now: count,
  /** Next offset the owner will append. */
  tail: Offset,
  /** The owner's confirmed tail: every message below it is confirmed. */
  confirmedTail: Offset,
  /** Offsets below this were truncated by the owner: a learner starting lower copies a checkpoint. */
  logStart: Offset,
  /** This partition's message size, bytes. */
  messageBytes: z.int().min(1),
  boundary: Offset.nullable(),
  replicas: z.array(ReplicaProgress),
});
export type Progress = z.infer<typeof Progress>;

export const Transfer = z.object({
  partition: PartitionId,
  node: NodeId,
  /** Recovery transfers (rejoining suspended followers) always come before rebalancing ones. */
  kind: z.enum(['recovery', 'rebalance']),
  bytesRemaining: count,
  /** A rebalancing transfer paused (holding no slot) while a recovery transfer waits for one. */
  pausedForRecovery: z.boolean().default(false),
});
export type Transfer = z.infer<typeof Transfer>;

export const SyncBudget = z.object({
  perNodeLimit: z.int().min(0),
  clusterLimit: z.int().min(0),
  clusterInUse: z.int().min(0),
  nodes: z.array(z.object({ node: NodeId, inUse: z.int().min(0), limit: z.int().min(0) })),
  transfers: z.array(Transfer),
});
export type SyncBudget = z.infer<typeof SyncBudget>;

export const PartitionView = z.object({ partition: Partition, progress: Progress });
export type PartitionView = z.infer<typeof PartitionView>;

// ---------------------------------------------------------------- node draining

/**
 * PUT /v1/nodes/{id}/draining: marks a node as draining (add-learner then refuses it with node_draining,
 * and the rebalancer moves every copy off it) or clears the mark. Idempotent: setting the flag it already has
 * changes nothing and emits no event. Answers the node.
 */
export const SetDrainingRequest = z
  .object({
    draining: z.boolean(),
    /** Why, in words, for the feed and the operator (e.g. "decommission rack 4"). */
    reason: z.string().min(1).max(200).optional(),
  })
  .strict();
export type SetDrainingRequest = z.infer<typeof SetDrainingRequest>;

// ---------------------------------------------------------------- guarded writes

export const IdempotencyKey = z.string().min(1).max(200);

const guard = {
  /** The partition generation the caller read; a different one is refused with generation_mismatch. */
  expectedGeneration: count,
  /** The same key again returns the first reply, so a retry after a lost reply is harmless. */
  idempotencyKey: IdempotencyKey,
};

export const AddLearnerRequest = z.object({ ...guard, node: NodeId }).strict();
export const DropLearnerRequest = z.object({ ...guard, node: NodeId }).strict();
/**
 * Step 1, or the swap back: `learner` is then the leaving R, counting again, and `leaving` the T that joined
 * in R's place.
 */
export const SwapRequest = z.object({ ...guard, learner: NodeId, leaving: NodeId }).strict();
export const RemoveLeavingRequest = z.object({ ...guard, node: NodeId }).strict();
export const PromoteLearnerRequest = z.object({ ...guard, node: NodeId }).strict();
export const CloseAdmissionRequest = z.object({ ...guard }).strict();
export const ContinuationCertificate = z
  .object({
    /** The final boundary the old owner reported when it closed admission. */
    finalBoundary: Offset,
    /** The epoch being continued; the new owner serves at epoch + 1. */
    epoch: count,
  })
  .strict();
export const CommitOwnerRequest = z
  .object({ ...guard, newOwner: NodeId, certificate: ContinuationCertificate })
  .strict();
export const ReopenAdmissionRequest = z.object({ ...guard }).strict();

/** Every guarded write, by the path segment that names it (POST /v1/partitions/{id}/{write}). */
export const GuardedWrites = {
  'add-learner': AddLearnerRequest,
  'drop-learner': DropLearnerRequest,
  swap: SwapRequest,
  'remove-leaving': RemoveLeavingRequest,
  'promote-learner': PromoteLearnerRequest,
  'close-admission': CloseAdmissionRequest,
  'commit-owner': CommitOwnerRequest,
  'reopen-admission': ReopenAdmissionRequest,
} as const;
export type GuardedWriteName = keyof typeof GuardedWrites;
export const GuardedWriteName = z.enum(Object.keys(GuardedWrites) as [GuardedWriteName, ...GuardedWriteName[]]);
export type GuardedWriteRequest<N extends GuardedWriteName> = z.infer<(typeof GuardedWrites)[N]>;

export const RefusalCode = z.enum([
  'pending_recovery',
  'generation_mismatch',
  'no_sync_budget',
  'not_admitted',
  'not_caught_up',
  'boundary_not_covered',
  'change_in_flight',
  'above_maximum',
  'unknown_node',
  'node_down',
  'node_draining',
  'not_a_queue',
  'already_a_replica',
  'not_a_learner',
  'not_a_follower',
  'not_leaving',
  'admission_closed',
  'admission_open',
  'certificate_mismatch',
  'injected',
]);
export type RefusalCode = z.infer<typeof RefusalCode>;

export const Refusal = z.object({
  code: RefusalCode,
  /** Plain words: what was wrong and what was expected. */
  message: z.string(),
  /** What the cluster saw when it refused (generation, offsets, budget in use, ...). */
  saw: z.record(z.string(), z.unknown()),
});
export type Refusal = z.infer<typeof Refusal>;

export const WriteAccepted = z.object({
  ok: z.literal(true),
  write: GuardedWriteName,
  partition: Partition,
  /** swap: boundary B; close-admission: the final boundary. */
  boundary: Offset.nullable(),
});
export const WriteRefused = z.object({ ok: z.literal(false), write: GuardedWriteName, refusal: Refusal });
export const WriteReply = z.discriminatedUnion('ok', [WriteAccepted, WriteRefused]);
export type WriteAccepted = z.infer<typeof WriteAccepted>;
export type WriteRefused = z.infer<typeof WriteRefused>;
export type WriteReply = z.infer<typeof WriteReply>;

// ---------------------------------------------------------------- event feed

const eventBase = { seq: count, at: count };
const partitionEvent = { ...eventBase, partition: PartitionId };
export const ClusterEvent = z.discriminatedUnion('type', [
  z.object({
    ...partitionEvent,
    type: z.literal('progress'),
    generation: count,
    confirmedTail: Offset,
    boundary: Offset.nullable(),
    replicas: z.array(
      z.object({
        node: NodeId,
        durableOffset: Offset,
        bytesRemaining: count,
        stalled: z.boolean(),
        pausedForRecovery: z.boolean().default(false),
      }),
    ),
  }),
  z.object({ ...partitionEvent, type: z.literal('admitted'), node: NodeId, generation: count }),
  z.object({ ...partitionEvent, type: z.literal('suspended'), node: NodeId, generation: count }),
  z.object({ ...partitionEvent, type: z.literal('recovery_opened'), epoch: count, failedOwner: NodeId }),
  z.object({
    ...partitionEvent,
    type: z.literal('recovery_activated'),
    epoch: count,
    owner: NodeId,
    generation: count,
  }),
  z.object({
    ...partitionEvent,
    type: z.literal('assignment_changed'),
    write: GuardedWriteName,
    generation: count,
  }),
  z.object({ ...partitionEvent, type: z.literal('admission_closed'), finalBoundary: Offset }),
  z.object({ ...partitionEvent, type: z.literal('admission_reopened') }),
  z.object({ ...eventBase, type: z.literal('node_down'), node: NodeId }),
  z.object({ ...eventBase, type: z.literal('node_up'), node: NodeId, processId: z.string() }),
  z.object({ ...eventBase, type: z.literal('node_joined'), node: NodeId }),
  /** A node's draining mark set or cleared (PUT /v1/nodes/{id}/draining). */
  z.object({
    ...eventBase,
    type: z.literal('node_draining'),
    node: NodeId,
    draining: z.boolean(),
    reason: z.string().nullable(),
  }),
  z.object({ ...eventBase, type: z.literal('disk_lost'), node: NodeId }),
]);
export type ClusterEvent = z.infer<typeof ClusterEvent>;
export type ClusterEventType = ClusterEvent['type'];

export const EventsQuery = z
  .object({
    after: z.coerce.number().pipe(count).default(0),
    limit: z.coerce.number().pipe(z.int().min(1).max(10_000)).default(1000),
    /** Long-poll: wait up to this many wall milliseconds for an event after `after`. */
    waitMs: z.coerce.number().pipe(z.int().min(0).max(60_000)).default(0),
  })
  .strict();
export const EventsPage = z.object({
  events: z.array(ClusterEvent),
  /** Pass as `after` next time. */
  cursor: count,
});
export type EventsPage = z.infer<typeof EventsPage>;

// ---------------------------------------------------------------- invariants

export const Breach = z.object({
  at: count,
  /** 1-5, numbered as in the design's safety invariants. */
  invariant: z.int().min(1).max(5),
  partition: PartitionId,
  offset: Offset.nullable(),
  detail: z.string(),
  state: z.record(z.string(), z.unknown()),
});
export type Breach = z.infer<typeof Breach>;
export const InvariantsReport = z.object({ checks: count, breaches: z.array(Breach) });
export type InvariantsReport = z.infer<typeof InvariantsReport>;

// ---------------------------------------------------------------- reference-cluster controls (not part of what a broker must offer)
//
// Everything above is the contract: what every broker offers the rebalancer. Everything below is the
// reference cluster's optional test controls, tagged "test-controls" in the OpenAPI document: a stepped clock,
// fault injection, publishing, publish rates, joining and deleting nodes, creating and
// deleting partitions.
// A production broker offers none of them (`GET /v1/controls` answers 404); `GET /v1/invariants` belongs
// with them in spirit: only a broker that checks its own invariants can serve it. The conformance suite reads
// `GET /v1/controls` and skips, with the reason, every case that needs a control the broker does not offer.

/** One test control, as `GET /v1/controls` lists it. */
export const ControlName = z.enum([
  /** `POST /v1/clock/advance`: time moves only when asked (a stepped clock). */
  'advance-clock',
  /** `POST /v1/faults`: crash, restart, lose a disk, fail an owner, stall a transfer, ... */
  'faults',
  /** `POST /v1/partitions/{id}/publish`. */
  'publish',
  /** `POST /v1/partitions/{id}/rate`. */
  'set-rate',
  /** `POST /v1/nodes`. */
  'join-node',
  /** `POST /v1/partitions`. */
  'create-partition',
  /** `DELETE /v1/partitions/{id}`: forgets a partition, so a test leaves the topology as it found it. */
  'delete-partition',
  /** `DELETE /v1/nodes/{id}`: removes a node that holds no replica, retained copy or stalled transfer. */
  'delete-node',
  /** `GET /v1/invariants`. */
  'invariants',
]);
export type ControlName = z.infer<typeof ControlName>;
export const Controls = z.object({
  /** wall: time passes on its own; stepped: only `POST /v1/clock/advance` moves it. */
  clock: z.enum(['wall', 'stepped']),
  offered: z.array(ControlName),
});
export type Controls = z.infer<typeof Controls>;

export const ClockState = z.object({ mode: z.enum(['wall', 'stepped']), now: count });
export const AdvanceRequest = z.object({ ms: z.int().min(1).max(86_400_000) }).strict();
export const PublishRequest = z.object({ count: z.int().min(1).max(1_000_000) }).strict();
export const PublishReply = z.object({ firstOffset: Offset, nextOffset: Offset });
export const SetRateRequest = z.object({ publishRate: z.number().min(0).max(1_000_000) }).strict();
export const JoinNodeRequest = z
  .object({ id: NodeId, capacity: z.number().positive().max(1000).default(1), zone: z.string().min(1).max(64).default('z1') })
  .strict();
/** A new partition placed on the given nodes (owner first); its replication factor is their number. */
export const CreatePartitionRequest = z
  .object({
    id: PartitionId,
    kind: z.enum(['queue', 'stream']).default('queue'),
    replicas: z
      .array(NodeId)
      .min(1)
      .max(16)
      .refine((r) => new Set(r).size === r.length, 'replicas must be distinct nodes'),
    /** Messages the log starts with; omitted: the cluster's configured initial messages. */
    initialMessages: z.int().min(0).max(1e12).optional(),
    /** This partition's publish rate, messages per second; omitted: the cluster's configured rate. */
    publishRate: z.number().min(0).max(1_000_000).optional(),
    /** This partition's message size, bytes; omitted: the cluster's configured size. */
    messageBytes: z.int().min(1).max(100_000_000).optional(),
  })
  .strict();
export type CreatePartitionRequest = z.infer<typeof CreatePartitionRequest>;
/** What a delete control removed. A node still in use is refused 409 (conflict) naming every use. */
export const DeleteReply = z.object({ deleted: z.enum(['node', 'partition']), id: z.string() });

export const Fault = z.discriminatedUnion('fault', [
  z.object({ fault: z.literal('crash-node'), node: NodeId }).strict(),
  z.object({ fault: z.literal('restart-node'), node: NodeId }).strict(),
  z.object({ fault: z.literal('lose-disk'), node: NodeId }).strict(),
  z.object({ fault: z.literal('fail-owner'), partition: PartitionId }).strict(),
  z.object({ fault: z.literal('delay-events'), ms: z.int().min(0).max(3_600_000) }).strict(),
  z.object({ fault: z.literal('drop-events'), count: z.int().min(0).max(1_000_000) }).strict(),
  z
    .object({
      fault: z.literal('refuse-next-write'),
      partition: PartitionId.optional(),
      write: GuardedWriteName.optional(),
    })
    .strict(),
  z.object({ fault: z.literal('stall-transfer'), partition: PartitionId, node: NodeId, stalled: z.boolean() }).strict(),
  /** The same as PUT /v1/nodes/{id}/draining without a reason; kept for existing tests and scripts. */
  z.object({ fault: z.literal('set-draining'), node: NodeId, draining: z.boolean() }).strict(),
]);
export type Fault = z.infer<typeof Fault>;
export const FaultReply = z.object({ ok: z.literal(true), fault: z.string(), detail: z.string() });

/** Every 4xx reply that is not a typed refusal. */
export const BadRequest = z.object({
  error: z.enum(['bad_request', 'not_found', 'conflict', 'unauthorized', 'gone']),
  message: z.string(),
  issues: z.array(z.object({ path: z.string(), message: z.string() })).default([]),
});
export type BadRequest = z.infer<typeof BadRequest>;
