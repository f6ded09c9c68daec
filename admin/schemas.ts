/**
 * Bodies and queries of the admin API as zod schemas: the server validates with them and the OpenAPI document
 * is generated from them, so the two cannot drift apart.
 */
import { z } from 'zod';
import { NodeId, PartitionId } from '../cluster/contract';

const reason = z.string().trim().min(1, 'give a reason: it is recorded in the audit log').max(500);

export const ReasonBody = z.object({ reason }).strict();

export const MoveRequestBody = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('follower-move'), partition: PartitionId, from: NodeId, to: NodeId, reason }).strict(),
  z.object({ kind: z.literal('owner-handoff'), partition: PartitionId, from: NodeId, to: NodeId, reason }).strict(),
  z.object({ kind: z.literal('owner-move'), partition: PartitionId, from: NodeId, to: NodeId, via: NodeId.optional(), reason }).strict(),
  z.object({ kind: z.literal('grow'), partition: PartitionId, to: NodeId, reason }).strict(),
  z.object({ kind: z.literal('replace'), partition: PartitionId, lost: NodeId, with: NodeId, reason }).strict(),
]);
export type MoveRequestBody = z.infer<typeof MoveRequestBody>;

export const NodeActionBody = z.object({ node: NodeId, reason }).strict();

/** `queuesOnly`: move every queue copy off the node and leave its stream copies (a stream copy is refused without it). */
export const DrainBody = z.object({ node: NodeId, queuesOnly: z.boolean().default(false), reason }).strict();
export const PartitionActionBody = z.object({ partition: PartitionId, reason }).strict();

export const PartitionParams = z.object({ partition: PartitionId }).strict();
export const NodeParams = z.object({ node: NodeId }).strict();

/** How far back the history goes: the service keeps an hour. */
export const HistoryQuery = z
  .object({ minutes: z.coerce.number().pipe(z.int('expected whole minutes').min(1).max(60, 'the service keeps 60 minutes of history')).default(60) })
  .strict();

/** A plan id as propose mode's loop makes them. */
export const PlanParams = z.object({ id: z.string().regex(/^p-[0-9a-f]{8}$/, 'a plan id: p- and 8 hex digits, for example p-3f2a9c1b') }).strict();

const page = {
  offset: z.coerce.number().pipe(z.int().min(0)).default(0),
  limit: z.coerce.number().pipe(z.int().min(1).max(500)).default(50),
};

export const NodesQuery = z
  .object({
    ...page,
    /** A cluster's whole list fits one page, as the CLI's `nodes` reads it: the rows then agree with the mean. */
    limit: z.coerce.number().pipe(z.int().min(1).max(10_000)).default(50),
    /** Highest total first (default), or by id. */
    sort: z.enum(['total', 'id']).default('total'),
    /** Only nodes whose id or zone contains this text. */
    filter: z.string().max(100).optional(),
  })
  .strict();

export const MovesQuery = z
  .object({
    ...page,
    /** Every move in flight fits one page, as the CLI's `moves` reads them. */
    limit: z.coerce.number().pipe(z.int().min(1).max(10_000)).default(50),
    /** How many ended moves to list besides the running ones. */
    recent: z.coerce.number().pipe(z.int().min(0).max(100)).default(10),
    /** How long to wait for the page's status queries, in ms (the CLI's `--wait`); the page's own bound when absent. */
    wait: z.coerce.number().pipe(z.int().min(0).max(60_000)).optional(),
  })
  .strict();

export const AuditQuery = z
  .object({
    limit: z.coerce.number().pipe(z.int().min(1).max(1000)).default(100),
    /** Entries older than this id (paging back). */
    before: z.coerce.number().pipe(z.int().min(1)).optional(),
  })
  .strict();

/** Who is acting, from the X-Operator header; the source when absent. */
export const Operator = z
  .string()
  .regex(/^[\w.@ -]{1,100}$/, 'an operator name: 1-100 letters, digits, spaces and . @ - _');

// ---------------------------------------------------------------- answers (described in the OpenAPI document)

const epochMs = z.int().describe('epoch milliseconds');
const EndedRun = z.object({
  runId: z.string(),
  workflowId: z.string(),
  partition: z.string(),
  kind: z.string().nullable(),
  from: z.string().nullable(),
  to: z.string().nullable(),
  closedAt: epochMs,
  outcome: z.string().describe('completed, cancelled or aborted; else how Temporal closed the workflow (terminated, timedout, ...)'),
});
const worst = z.object({ node: z.string(), deviation: z.number().describe("the node's value less the dimension's mean") }).nullable();

export const HistoryReply = z.object({
  intervalMs: z.int().describe('how often the service samples'),
  since: epochMs.describe('the oldest sample asked for (epoch ms)'),
  lastError: z.string().nullable().describe('why the last sample failed, null when it did not'),
  samples: z.array(
    z.object({
      at: epochMs,
      spread: z.number().describe('largest |score - mean| over live nodes that are not draining'),
      mean: z.number(),
      threshold: z.number().describe('half the band: nodes beyond mean ± threshold shed or receive'),
      worst: z.object({ owned: worst, followed: worst, history: worst, traffic: worst, sync: worst }).describe("per score dimension, the node furthest from that dimension's mean"),
      bytesPerSec: z.number().describe("bytes the broker's transfers copied per second since the previous sample"),
      running: z.int(),
      recoveryPending: z.int().describe('partitions with a recovery pending'),
    }),
  ),
  ended: z.array(EndedRun).describe('moves that ended, oldest first'),
  markers: z.array(z.object({ at: z.string(), actor: z.string(), source: z.string(), action: z.enum(['pause', 'resume']), reason: z.string() })).describe('pauses and resumes from the audit log'),
});

const dimensions = { owned: z.number(), followed: z.number(), history: z.number(), traffic: z.number(), sync: z.number(), total: z.number() };

export const NodeDetailReply = z.object({
  score: z.object({ node: z.string(), zone: z.string(), capacity: z.number(), live: z.boolean(), draining: z.boolean(), ...dimensions }),
  mean: z.number(),
  upper: z.number(),
  lower: z.number(),
  partitions: z.array(z.object({ partition: z.string(), kind: z.enum(['queue', 'stream']), role: z.enum(['owner', 'follower', 'learner', 'leaving']) })),
  running: z.array(z.object({ partition: z.string(), kind: z.string(), from: z.string().nullable(), to: z.string(), phase: z.string(), bytesTotal: z.int().nullable(), bytesCopied: z.int().nullable() })).describe('moves in progress onto or off the node'),
  ended: z.array(EndedRun).describe('moves onto or off the node that ended, oldest first'),
  points: z.array(z.object({ at: epochMs, ...dimensions, mean: z.number(), threshold: z.number() })).describe("the node's score at each sample, with the cluster's mean and threshold then"),
});
