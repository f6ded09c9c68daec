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
    /** Highest total first (default), or by id. */
    sort: z.enum(['total', 'id']).default('total'),
    /** Only nodes whose id or zone contains this text. */
    filter: z.string().max(100).optional(),
  })
  .strict();

export const MovesQuery = z
  .object({
    ...page,
    /** How many ended moves to list besides the running ones. */
    recent: z.coerce.number().pipe(z.int().min(0).max(100)).default(10),
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
