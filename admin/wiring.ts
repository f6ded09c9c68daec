/** The admin API's sources as they exist: the broker, Temporal (moves), the planner, the rebalancer. */
import type { Client } from '@temporalio/client';
import type { ClusterClient } from '../cluster/client';
import { cancelMove, listMoves, MoveRefused, recentMoves, showMove, startFollowerMove } from '../client/moves';
import { relayWorkflowId } from '../worker/relay';
import type { AdminDeps, ScoresView } from './deps';
import type { Topology } from '../cluster/contract';
import type { MoveStatus } from '../workflows/definitions';
import type { NodeScore, Plan } from '../planner/types';

export interface AdminSources {
  client: Client;
  cluster: ClusterClient;
  taskQueue: string;
}

const WEIGHTS = { owned: 1, followed: 0.5, history: 0, traffic: 0, sync: 0 };
const THRESHOLD = 1;

function scores(topology: Topology): ScoresView {
  const nodes: NodeScore[] = topology.nodes.map((n) => {
    const owned = topology.partitions.filter((p) => p.owner === n.id).length / n.capacity;
    const followed = topology.partitions.filter((p) => p.followers.includes(n.id) || p.learners.includes(n.id) || p.leaving === n.id).length / n.capacity;
    return { node: n.id, zone: n.zone, capacity: n.capacity, live: n.live, draining: n.draining, owned, followed, history: 0, traffic: 0, sync: 0, total: owned * WEIGHTS.owned + followed * WEIGHTS.followed };
  });
  const mean = nodes.reduce((s, n) => s + n.total, 0) / Math.max(1, nodes.length);
  const spread = Math.max(0, ...nodes.map((n) => Math.abs(n.total - mean)));
  return { nodes, weights: WEIGHTS, mean, upper: mean + THRESHOLD, lower: mean - THRESHOLD, spread };
}

export function createAdminDeps(src: AdminSources): AdminDeps {
  const { client, cluster } = src;
  const relayId = relayWorkflowId(cluster.baseUrl, src.taskQueue);
  let feedHead = 0;
  const notYet = (what: string) => new MoveRefused('not_available', `${what} is not available in this build`);
  return {
    topology: () => cluster.topology(),
    syncBudget: () => cluster.syncBudget(),
    invariants: () => cluster.invariants(),
    scores: (topology) => scores(topology),
    plan: (topology: Topology, _moves: MoveStatus[]): Plan => {
      const s = scores(topology);
      return { planningMs: 0, steps: [], spreadBefore: s.spread, spreadAfter: s.spread, mean: s.mean, threshold: THRESHOLD, predictedMs: 0, idleReason: 'no planner in this build' };
    },
    moves: () => listMoves(client),
    recentMoves: (limit) => recentMoves(client, limit),
    show: (partition) => showMove(client, partition, cluster),
    async start(request) {
      if (request.kind !== 'follower-move') throw notYet(`a ${request.kind}`);
      const handle = await startFollowerMove({ client, cluster, taskQueue: src.taskQueue }, { ...request, origin: 'operator' });
      return { workflowId: handle.workflowId };
    },
    cancel: (partition, by) => cancelMove(client, partition, by.reason),
    drain: () => Promise.reject(notYet('drain')),
    undrain: () => Promise.reject(notYet('undrain')),
    rebalancer: {
      status: async () => ({ state: 'absent', pausedBy: null, reason: null, since: null }),
      pause: () => Promise.reject(notYet('the rebalancer')),
      resume: () => Promise.reject(notYet('the rebalancer')),
    },
    async relayLag() {
      // The feed's head, read forward from where the last look ended: cheap however long the feed is.
      for (;;) {
        const page = await cluster.events(feedHead, { limit: 10_000 });
        feedHead = page.cursor;
        if (page.events.length < 10_000) break;
      }
      const description = await client.workflow.getHandle(relayId).describe().catch(() => null);
      const details = description?.raw.pendingActivities?.[0]?.heartbeatDetails?.payloads?.[0];
      if (!details) return null;
      const cursor = client.options.loadedDataConverter.payloadConverter.fromPayload<number>(details);
      return Math.max(0, feedHead - cursor);
    },
  };
}
