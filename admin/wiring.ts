/** The admin API's sources: the broker, Temporal (moves, the rebalancer loop, drains) and the planner. */
import type { Client } from '@temporalio/client';
import type { ClusterClient } from '../cluster/client';
import { TopologyModel } from '../cluster/model';
import { withCooledMoves } from '../operations/closed';
import { dryRun } from '../operations/dry-run';
import { startGrow, startReplace } from '../operations/grow';
import { startHandoff, startOwnerMove } from '../operations/handoff';
import { cancelMove, listMovesInProgress, moveStatusesWithin, outcomeOf, recentMoves, showMove, startFollowerMove } from '../operations/moves';
import { approvePlan, drainNotice, loopStatusIfAny, refreshPlan, setHold, setPaused, startDrain, undrain } from '../operations/rebalancer';
import { relayScope, relayWorkflowId } from '../operations/relay';
import { nodeScores } from '../operations/scores';
import { KeptReading, underReplicated } from '../planner';
import type { PlannerConfig, ProposalOp } from '../planner/types';
import { drainStatusQuery, RECONFIGURATION_ID_PREFIX, type ReconfigurationKind, type OperatorNote, type ProposedPlan, type RebalancerStatus } from '../rules/definitions';
import { KindKey, PartitionKey, SourceKey, TargetKey } from '../rules/search-attributes';
import type { AdminDeps, EndedRun, HoldView, RebalancerView } from './deps';
import { LatestAnswer } from './latest';

export interface AdminSources {
  client: Client;
  cluster: ClusterClient;
  taskQueue: string;
  /** The planner settings the rebalancer runs with: scores, thresholds and the dry run use the same. */
  planner: PlannerConfig;
  /** The worker's topology model when it runs in this process (npm start); else the service keeps its own. */
  topology?: TopologyModel;
}

/** A workflow's planner decisions by op, as the admin API names them (by kind). */
function byKind(startedByOp: Partial<Record<ProposalOp, number>> | undefined): RebalancerView['startedByKind'] {
  return { 'follower-move': startedByOp?.follower_move ?? 0, 'owner-handoff': startedByOp?.owner_handoff ?? 0, replace: startedByOp?.follower_replace ?? 0 };
}

type DrainDecisions = Awaited<ReturnType<AdminDeps['drainDecisions']>>[number];

/** How far back ended drains still count toward the planner decisions: far more than any scrape interval. */
const DRAIN_LOOKBACK_MS = 3_600_000;

function holdViews(holds: Record<string, OperatorNote>): HoldView[] {
  return Object.entries(holds).map(([id, n]) => ({ id, by: n.by, reason: n.reason, since: new Date(n.at).toISOString() }));
}

function stateOf(s: RebalancerStatus): RebalancerView {
  const note = s.paused ?? s.lastResumed;
  return {
    state: s.state,
    pausedBy: s.paused?.by ?? null,
    reason: s.paused?.reason ?? null,
    since: note ? new Date(note.at).toISOString() : null,
    waitingFor: s.waitingFor,
    startedByKind: byKind(s.startedByOp),
    pinned: holdViews(s.pinned),
    excluded: holdViews(s.excluded),
    mode: s.settings.mode ?? 'auto',
    pendingPlan: withoutBasis(s.approval?.pending ?? null),
    approved: s.approval?.approved ? { planId: s.approval.approved.planId, stepsLeft: s.approval.approved.steps.length } : null,
    ticks: s.ticks,
  };
}

function withoutBasis(plan: ProposedPlan | null): Omit<ProposedPlan, 'basis'> | null {
  if (!plan) return null;
  const { basis: _basis, ...shown } = plan;
  return shown;
}

const ABSENT: RebalancerView = { state: 'absent', pausedBy: null, reason: null, since: null, waitingFor: null, startedByKind: {}, pinned: [], excluded: [], mode: null, pendingPlan: null, approved: null, ticks: null };

/** How long a page waits for the loop's status query before it shows the last answer (as PAGE_STATUS_MS, and why). */
const LOOP_ANSWER_MS = 300;

export function createAdminDeps(src: AdminSources): AdminDeps {
  const { client, cluster, taskQueue, planner } = src;
  const ctx = { client, cluster, taskQueue };
  const scope = relayScope(cluster.baseUrl, taskQueue);
  const relayId = relayWorkflowId(cluster.baseUrl, taskQueue);
  let feedHead = 0;
  /**
   * The decisions of drain runs that ended, by run id, while they are listed: an ended run's totals never change,
   * and a query of it has a worker replay its whole history, on every scrape for the lookback's hour.
   */
  const endedDrains = new Map<string, DrainDecisions>();
  const loopStatus = () => loopStatusIfAny(client, scope);
  /** The loop as pages see it: waited for LOOP_ANSWER_MS, its last answer after that. */
  const loopAnswer = new LatestAnswer(loopStatus, LOOP_ANSWER_MS);
  const latestLoop = async (): Promise<{ loop: RebalancerStatus | null; asOf?: string }> => {
    const answer = await loopAnswer.get();
    return answer.late ? { loop: answer.value, asOf: new Date(answer.at).toISOString() } : { loop: answer.value };
  };
  /** The loop's reply to an operator's update is its newest status: pages show it at once. */
  const replied = (s: RebalancerStatus): RebalancerView => {
    loopAnswer.offer(s);
    return stateOf(s);
  };
  // Every page and scrape reads the topology: kept current from the broker's changes read, not read whole each time.
  const model = src.topology ?? new TopologyModel(cluster);
  // The node pages' reading of the partition records, followed from page to page as the loop's plan does.
  const kept = new KeptReading();
  return {
    source: { broker: cluster.baseUrl, taskQueue },
    topology: () => model.read(),
    topologyReads: () => model.counts(),
    syncBudget: () => cluster.syncBudget(),
    invariants: () => cluster.invariants(),
    scores: (topology, moves) => nodeScores(topology, moves, planner, kept),
    async plan(topology) {
      // The loop's own input when it runs (the dry run proposes what it starts next); the transfers give bytes left.
      const [loop, budget] = await Promise.all([loopStatus().then((s) => s && withCooledMoves(client, taskQueue, s)), cluster.syncBudget()]);
      return dryRun(topology, budget.transfers, loop, planner, loop ? Date.now() : topology.now);
    },
    underReplicated: (topology, moves) =>
      underReplicated(
        topology,
        planner.replaceAfterMs,
        moves.filter((m) => m.kind === 'replace'),
      ),
    moves: () => listMovesInProgress(client, taskQueue),
    statuses: (moves, withinMs, onAnswer) => moveStatusesWithin(client, moves, withinMs ?? null, onAnswer),
    recentMoves: (limit) => recentMoves(client, limit),
    async endedMoves(since, known) {
      const query = `ExecutionStatus != 'Running' AND WorkflowId STARTS_WITH '${RECONFIGURATION_ID_PREFIX}' AND ExecutionStatus != 'ContinuedAsNew' AND TaskQueue = '${taskQueue}' AND CloseTime > '${since.toISOString()}'`;
      const found: EndedRun[] = [];
      for await (const wf of client.workflow.list({ query })) {
        if (known(wf.runId)) continue;
        const outcome = await outcomeOf(client.workflow.getHandle(wf.workflowId, wf.runId)).catch(() => null);
        const attrs = wf.typedSearchAttributes;
        found.push({
          runId: wf.runId,
          workflowId: wf.workflowId,
          partition: attrs.get(PartitionKey) ?? wf.workflowId.slice(RECONFIGURATION_ID_PREFIX.length),
          kind: (attrs.get(KindKey) as ReconfigurationKind | undefined) ?? outcome?.kind ?? null,
          from: attrs.get(SourceKey) ?? null,
          to: attrs.get(TargetKey) ?? null,
          closedAt: wf.closeTime?.getTime() ?? Date.now(),
          outcome: outcome?.status ?? wf.status.name.toLowerCase(),
        });
      }
      return found;
    },
    show: (partition) => showMove(client, partition, cluster),
    async start(request, by) {
      const common = { origin: 'operator' as const, reason: `${by.reason} (${by.actor})` };
      switch (request.kind) {
        case 'follower-move':
          return startFollowerMove(ctx, { ...request, ...common });
        case 'owner-handoff':
          return startHandoff(ctx, { ...request, ...common });
        case 'owner-move':
          return startOwnerMove(ctx, { ...request, ...common });
        case 'grow':
          return startGrow(ctx, { ...request, ...common });
        case 'replace':
          return startReplace(ctx, { ...request, ...common });
      }
    },
    cancel: (partition, by) => cancelMove(client, partition, `${by.reason} (${by.actor})`),
    async drain(node, by, options) {
      const notice = drainNotice(await loopStatus(), await cluster.topology(), node);
      return startDrain(ctx, { node, by: by.actor, reason: by.reason, ...(options?.queuesOnly ? { queuesOnly: true } : {}), ...(notice ? { notice } : {}) });
    },
    async undrain(node, by) {
      await undrain({ client, cluster }, node, `${by.reason} (${by.actor})`);
    },
    rebalancer: {
      async status() {
        const { loop, asOf } = await latestLoop();
        const view = loop ? stateOf(loop) : ABSENT;
        return asOf ? { ...view, asOf } : view;
      },
      async loop() {
        const { loop, asOf } = await latestLoop();
        return loop && asOf ? { ...loop, asOf } : loop;
      },
      pause: async (by) => replied(await setPaused(client, scope, true, { by: by.actor, reason: by.reason })),
      resume: async (by) => replied(await setPaused(client, scope, false, { by: by.actor, reason: by.reason })),
      hold: async (action, id, by) => replied(await setHold(client, scope, action, id, { by: by.actor, reason: by.reason })),
      async approve(planId, by) {
        const { status: _status, ...result } = await approvePlan(client, scope, { planId, by: by.actor, reason: by.reason });
        return result;
      },
      async refresh(by) {
        const { status: _status, ...result } = await refreshPlan(client, scope, { by: by.actor, reason: by.reason });
        return result;
      },
    },
    async drainDecisions() {
      const since = new Date(Date.now() - DRAIN_LOOKBACK_MS).toISOString();
      // A run that continued as new carries its totals into the next one, which is listed instead.
      const query = `WorkflowType = 'drain' AND TaskQueue = '${taskQueue}' AND (ExecutionStatus = 'Running' OR (CloseTime > '${since}' AND ExecutionStatus != 'ContinuedAsNew'))`;
      const found: DrainDecisions[] = [];
      const listed = new Set<string>();
      for await (const w of client.workflow.list({ query })) {
        const running = w.status.name === 'RUNNING';
        if (!running) {
          listed.add(w.runId);
          const known = endedDrains.get(w.runId);
          if (known) {
            found.push(known);
            continue;
          }
        }
        // A run that ended between the listing and the query is read by its run id below, on the next scrape.
        const status = await client.workflow
          .getHandle(w.workflowId, running ? undefined : w.runId)
          .query(drainStatusQuery)
          .catch(() => null);
        if (!status) continue;
        const decisions = { drain: `${w.workflowId}@${status.since ?? w.runId}`, startedByKind: byKind(status.startedByOp) };
        if (!running) endedDrains.set(w.runId, decisions);
        found.push(decisions);
      }
      for (const runId of endedDrains.keys()) if (!listed.has(runId)) endedDrains.delete(runId);
      return found;
    },
    events: (after, limit) => cluster.events(after, { limit }),
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
