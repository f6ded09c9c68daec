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

/** An accepted write's reply may carry the progress read right after it (`readProgress`). */
export type WriteOutcome = WriteReply & { progress?: Progress };

export interface MoveContext {
  view: PartitionView;
  nodes: Node[];
}

/** A 4xx other than a typed refusal means the request itself is wrong: retrying cannot help. */
function rethrow(err: unknown): never {
  if (err instanceof ClusterHttpError && err.status >= 400 && err.status < 500) {
    throw ApplicationFailure.nonRetryable(err.message, err.status === 404 ? 'NotFound' : 'BrokerRejected');
  }
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
     * `readProgress`: after an accepted write, also read the partition's progress, so the workflow learns (for
     * example) whether T already covers the boundary a swap returned without waiting for the next progress event.
     */
    async guardedWrite<N extends GuardedWriteName>(
      partition: string,
      write: N,
      request: GuardedWriteRequest<N>,
      options: { readProgress?: boolean } = {},
    ): Promise<WriteOutcome> {
      try {
        const reply = await deps.cluster.write(partition, write, request);
        log?.info(
          { partition, write, key: request.idempotencyKey, ok: reply.ok, refusal: reply.ok ? undefined : reply.refusal.code },
          reply.ok ? `${write} on ${partition} accepted` : `${write} on ${partition} refused: ${reply.refusal.message}`,
        );
        // A failed read retries the activity, which sends the write again under the same key: same reply.
        if (reply.ok && options.readProgress) return { ...reply, progress: (await deps.cluster.partition(partition)).progress };
        return reply;
      } catch (err) {
        rethrow(err);
      }
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
