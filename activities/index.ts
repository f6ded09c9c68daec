/**
 * Activities: reads and guarded writes against the broker contract. Built by a factory so tests can inject
 * a real or a fake broker client. A guarded write is sent with the idempotency key the workflow derived,
 * so Temporal's retry after a lost reply gets the first answer back instead of a spurious refusal.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import { ClusterHttpError, type ClusterClient } from '../cluster/client';
import type { GuardedWriteName, GuardedWriteRequest, Node, PartitionView, Progress, WriteReply } from '../cluster/contract';

export interface ActivityDeps {
  cluster: Pick<ClusterClient, 'partition' | 'nodes' | 'write'>;
  logger?: Logger;
}

/** A request the broker rejected for good (a 4xx that is not a typed refusal). */
export interface Rejected {
  type: 'NotFound' | 'BrokerRejected';
  message: string;
}

/**
 * An accepted write's reply may carry what became of the write chained to it (`then`: its reply, or its
 * rejection, reported rather than thrown since the first write stands) and the progress read after both.
 */
export type WriteOutcome = WriteReply & { then?: WriteReply | { rejected: Rejected }; progress?: Progress };

export interface MoveContext {
  view: PartitionView;
  nodes: Node[];
}

/** A 4xx other than a typed refusal means the request itself is wrong: retrying cannot help. */
function rejectionOf(err: unknown): Rejected | null {
  if (err instanceof ClusterHttpError && err.status >= 400 && err.status < 500) return { type: err.status === 404 ? 'NotFound' : 'BrokerRejected', message: err.message };
  return null;
}

function rethrow(err: unknown): never {
  const rejected = rejectionOf(err);
  if (rejected) throw ApplicationFailure.nonRetryable(rejected.message, rejected.type);
  throw err;
}

/** The counted copies (the owner and its live, admitted, unsuspended followers) durable below `offset`. */
export function countedBelow({ view, nodes }: MoveContext, offset: number): string[] {
  const p = view.partition;
  const live = new Set(nodes.filter((n) => n.live).map((n) => n.id));
  return view.progress.replicas
    .filter((r) => r.node === p.owner || (p.followers.includes(r.node) && live.has(r.node) && r.admitted && !r.suspended))
    .filter((r) => r.durableOffset < offset)
    .map((r) => r.node);
}

export function createActivities(deps: ActivityDeps) {
  const log = deps.logger?.child({ component: 'activities' });
  /** The partition's record and progress, with the nodes a move has to check. */
  async function readMoveContext(partition: string): Promise<MoveContext> {
    try {
      const [view, { nodes }] = await Promise.all([deps.cluster.partition(partition), deps.cluster.nodes()]);
      return { view, nodes };
    } catch (err) {
      rethrow(err);
    }
  }
  return {
    readMoveContext,

    /**
     * A wait's poll (patch `poll-reads-the-partition`): the partition's record and progress, whose replicas say which
     * of its nodes are live; no read of every node, whose list grew each poll's result with the cluster (about 170 KB
     * at 1,000 nodes, recorded in the move's history each time).
     */
    async readPartition(partition: string): Promise<PartitionView> {
      try {
        return await deps.cluster.partition(partition);
      } catch (err) {
        rethrow(err);
      }
    },

    /**
     * Reads the partition until every counted copy is durable at `offset`, or `maxMs` passed. A handoff waits here
     * while admission is closed: polling the broker in the worker costs no timer and no workflow task per try.
     */
    async readWhenDurable(partition: string, offset: number, maxMs: number, everyMs = 20): Promise<MoveContext> {
      const until = Date.now() + maxMs;
      for (;;) {
        const ctx = await readMoveContext(partition);
        if (countedBelow(ctx, offset).length === 0 || Date.now() >= until) return ctx;
        await new Promise((r) => setTimeout(r, everyMs));
      }
    },

    /**
     * One guarded write. `then`: right after it is accepted, the next step's write too, under the generation the
     * reply gives and the key the workflow chose (a swap followed by remove-leaving: the broker refuses the
     * removal, changing nothing, unless T already covers B), saving a round trip through the workflow.
     * `readProgress`: then read the partition's progress, so the workflow learns (for example) whether T covers B
     * without waiting for the next progress event. A retry of the activity sends the same writes under the same
     * keys and gets the first replies back.
     */
    async guardedWrite<N extends GuardedWriteName>(
      partition: string,
      write: N,
      request: GuardedWriteRequest<N>,
      options: { readProgress?: boolean; then?: { write: GuardedWriteName; request: Record<string, unknown> & { idempotencyKey: string } } } = {},
    ): Promise<WriteOutcome> {
      const send = async (name: GuardedWriteName, body: GuardedWriteRequest<GuardedWriteName>): Promise<WriteReply> => {
        const reply = await deps.cluster.write(partition, name, body);
        // Each step of a move, and each retry of a refused one: the move's start and end lines are the info ones.
        log?.debug(
          { partition, write: name, key: body.idempotencyKey, ok: reply.ok, refusal: reply.ok ? undefined : reply.refusal.code },
          reply.ok ? `${name} on ${partition} accepted` : `${name} on ${partition} refused: ${reply.refusal.message}`,
        );
        return reply;
      };
      try {
        const reply: WriteOutcome = await send(write, request);
        if (!reply.ok) return reply;
        const next = options.then
          ? await send(options.then.write, { ...options.then.request, expectedGeneration: reply.partition.generation } as GuardedWriteRequest<GuardedWriteName>).catch(
              (err: unknown) => {
                const rejected = rejectionOf(err);
                if (!rejected) throw err;
                return { rejected };
              },
            )
          : undefined;
        const progress = options.readProgress ? (await deps.cluster.partition(partition)).progress : undefined;
        return { ...reply, ...(next ? { then: next } : {}), ...(progress ? { progress } : {}) };
      } catch (err) {
        rethrow(err);
      }
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
