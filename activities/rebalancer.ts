/**
 * Activities of the rebalancer loop and drains: a snapshot of the broker and of the moves in flight, the
 * planner (injected, so planning never runs in the workflow sandbox and tests can plan as they need), the
 * worker's configured settings, and the draining mark (a write through the contract).
 */
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import { memoOutcome, outcomeOf } from '../operations/moves';
import { RunningMoves } from '../operations/running';
import type { ClusterClient } from '../cluster/client';
import type { Topology } from '../cluster/contract';
import { KeptReading, planToConvergence, predictMs } from '../planner';
import { DEFAULT_PLANNER_CONFIG } from '../planner/config';
import type { InFlightMove, Plan, PlanInput, PlannerConfig } from '../planner/types';
import { topologySignal, type EndedMove, type PlanBasis, type ProposedPlan, type RebalancerSettings, type StaleStep, type TrackedMove } from '../rules/definitions';
import { basisOf, staleSteps, type Holds } from '../rules/rebalancer-approval';
import { checkDrain, drainBlockers, drainLeft, planInputFor, type DrainBlocker, type DrainCheck, type DrainLeft } from '../rules/rebalancer-drain-rules';
import { activeNodes, inFlightMoves, recoveryPending, type ClosedReconfiguration } from '../rules/rebalancer-rules';
import { CooledMoves, withMoves } from '../operations/closed';
import { UnlistedChanges } from '../operations/unlisted';
import { notAtRest } from '../cluster/derived';

export interface RebalancerDeps {
  cluster: Pick<ClusterClient, 'topology' | 'syncBudget'>;
  /** Sets or clears a node's draining mark through the contract. */
  setDraining: (node: string, draining: boolean, reason: string) => Promise<unknown>;
  /** Temporal, to learn how the moves in flight ended. */
  client: Client;
  /** Plans with `kept`, this worker's reading of the partition records, which it keeps from one plan to the next. */
  plan: (input: PlanInput, config: PlannerConfig, kept?: KeptReading) => Plan;
  /** The worker's configured settings, for drains started without their own. */
  settings?: RebalancerSettings;
  logger?: Logger;
}

/**
 * What a tick needs to know, kept small: it is recorded in the workflow's history every tick, so the topology
 * itself never is (the planner activity reads it again).
 */
export interface Snapshot {
  inFlight: InFlightMove[];
  /** The tracked moves that ended since they were started. */
  ended: EndedMove[];
  /** Pending recoveries in words, or null. */
  recoveryPending: string | null;
  /** Nodes marked draining. */
  draining: string[];
  /** Nodes live and not draining: those the mean is over. Absent in a snapshot an older worker recorded. */
  active?: string[];
  /** What is left on the node a drain empties, when asked for one. */
  left: DrainLeft | null;
  /** Reconfigurations that completed since the time asked for, whoever started them; absent when not asked. */
  closed?: ClosedReconfiguration[];
  /** Partitions cooling after a completed reconfiguration, in this worker's book (see `CooledMoves`); absent when not kept. */
  cooling?: number;
}

export interface PlanRequest {
  inFlight: InFlightMove[];
  cooldowns: PlanInput['cooldowns'];
  now: number;
  draining?: string[];
  /** A drain asks why the copies left on its node that the plan moves nowhere stay there. */
  drain?: { node: string; queuesOnly: boolean };
  /** The loop's pins and exclusions (absent for a drain: what it was asked to empty moves regardless). */
  pinned?: PlanInput['pinned'];
  /** The loop: plan with the partition cooldowns this worker keeps from visibility too (`CooledMoves`). */
  cooled?: boolean;
  excluded?: PlanInput['excluded'];
}

/** A plan, and for a drain what keeps the rest of its node's copies in place (absent in plans older workers recorded). */
export type DrainPlan = Plan & { blockers?: DrainBlocker[] };

/**
 * How a move ended, from Temporal's record of it and the outcome it returned or failed with; null while it runs.
 * Followed by workflow id, not by the run it started as: a move that continued as new runs on under another run
 * id in the same chain (the latest run names the chain's first run), and a chain that ended before a newer
 * reconfiguration of the partition started is read from its first run on (its result follows the chain).
 */
async function endOf(client: Client, m: TrackedMove): Promise<EndedMove | null> {
  const end = (status: EndedMove['status'], detail: string | null): EndedMove => ({ workflowId: m.workflowId, runId: m.runId, status, detail });
  let latest;
  try {
    latest = await client.workflow.getHandle(m.workflowId).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return end('aborted', 'the workflow is gone from Temporal');
    throw err;
  }
  const ours = latest.runId === m.runId || latest.raw.workflowExecutionInfo?.firstRunId === m.runId;
  if (ours && latest.status.name === 'RUNNING') return null;
  const handle = client.workflow.getHandle(m.workflowId, ours ? latest.runId : m.runId);
  // A run since the `outcome-memo` patch that closed itself keeps its outcome in its memo: no second read of Temporal.
  const closedItself = ours && ['COMPLETED', 'FAILED', 'CANCELLED'].includes(latest.status.name);
  const outcome = (closedItself ? memoOutcome(latest.memo) : null) ?? (await outcomeOf(handle));
  if (outcome) return end(outcome.status, outcome.status === 'completed' ? null : outcome.reason);
  // Ended without an outcome: terminated or timed out.
  const status = ours ? latest.status.name : (await handle.describe()).status.name;
  return end(status === 'CANCELLED' ? 'cancelled' : 'aborted', status.toLowerCase());
}

/**
 * The most steps one proposal holds: the first of the plan to convergence, the rest proposed once these are done.
 * The proposal is the planning activity's result and part of the state the loop carries across continue-as-new;
 * at 1,000 nodes a join's plan to convergence has thousands of steps (3,757 steps, 841 KB at 100,000 partitions),
 * past the 512 KB Temporal warns at. A proposal pending and one approved are each about 60 KB at 250 steps, so with
 * 1,000 tracked moves (300 KB) the state stays under that too (`npm run bench -- payloads`).
 */
export const PROPOSAL_STEPS = 250;

/** The plan a proposal holds: its first `limit` steps, how many follow them, and the time those steps take. */
export function firstSteps(plan: Plan, config: PlannerConfig, limit = PROPOSAL_STEPS): Plan & { beyond?: number } {
  if (plan.steps.length <= limit) return plan;
  const steps = plan.steps.slice(0, limit);
  return { ...plan, steps, predictedMs: predictMs(steps, config), beyond: plan.steps.length - limit };
}

/** How much longer than its reads of the broker a snapshot waits for Temporal's lists (`listedWithin`). */
const LIST_GRACE_MS = 25;

/** The request with the partitions held for this tick (`UnlistedChanges`) left untouched, as another drain's are. */
function holding<R extends { cooldowns: PlanInput['cooldowns']; now: number }>(request: R, held: readonly string[]): R {
  if (held.length === 0) return request;
  const partitions = { ...request.cooldowns.partitions };
  for (const id of held) partitions[id] = Math.max(partitions[id] ?? 0, request.now + 1);
  return { ...request, cooldowns: { ...request.cooldowns, partitions } };
}

/** How long a snapshot's topology serves the plan of the same tick. */
const SAME_TICK_MS = 5_000;

/** The workflow run a local activity runs for and its task queue, or null outside one (a test calling it directly). */
function current(): { run: string | null; taskQueue: string } | null {
  try {
    const info = Context.current().info;
    return { run: info.workflowExecution?.runId ?? null, taskQueue: info.taskQueue };
  } catch {
    return null;
  }
}
const currentRun = (): string | null => current()?.run ?? null;

/**
 * How each tracked move ended, null while it runs: a move the task queue's book of moves in progress vouches for runs
 * (`RunningMoves`), every other one is described (`endOf`). Without a book (called outside an activity) each is described.
 */
export async function endsOf(
  client: Client,
  tracked: readonly TrackedMove[],
  book: Pick<RunningMoves, 'toDescribe'> | null,
  enough?: Promise<unknown>,
): Promise<{ ends: (EndedMove | null)[]; bookMs: number; described: number; late: Promise<TrackedMove[]> | null }> {
  const started = performance.now();
  const { asked, late } = book === null || tracked.length === 0 ? { asked: tracked, late: null } : await book.toDescribe(tracked, enough);
  const bookMs = Math.round(performance.now() - started);
  const named = new Set(asked);
  return { ends: await Promise.all(tracked.map((m) => (named.has(m) ? endOf(client, m) : null))), bookMs, described: named.size, late: late === null ? null : late.then((later) => later.filter((m) => !named.has(m))) };
}

export function createRebalancerActivities(deps: RebalancerDeps) {
  const log = deps.logger?.child({ component: 'rebalancer' });
  /**
   * The topology each run's last snapshot read, which that run's plan of the same tick takes instead of reading the
   * broker again: one read a tick (a 60 MB body at 100,000 partitions), and the plan judged on the view its moves in
   * flight were counted on (a recovery that opened between two reads showed in the plan but not in the snapshot).
   * Both are local activities, so they run in this worker; a plan elsewhere, or later, reads afresh.
   */
  const lastSeen = new Map<string, { topology: Topology; held: string[]; at: number }>();
  const remember = (topology: Topology, held: string[]): void => {
    const run = currentRun();
    if (run === null) return;
    lastSeen.set(run, { topology, held, at: Date.now() });
    setTimeout(() => {
      if (lastSeen.get(run)?.topology === topology) lastSeen.delete(run);
    }, SAME_TICK_MS).unref();
  };
  /** The topology of this tick's snapshot and the partitions it holds (`UnlistedChanges`), or a fresh read. */
  const topologyOfThisTick = async (): Promise<{ topology: Topology; held: string[] }> => {
    const run = currentRun();
    const seen = run === null ? undefined : lastSeen.get(run);
    if (run !== null) lastSeen.delete(run);
    return seen !== undefined && Date.now() - seen.at <= SAME_TICK_MS ? seen : { topology: await deps.cluster.topology(), held: [] };
  };
  /** Per task queue, the topologies a look at the closes may not have listed the changes of (one loop each). */
  const unlisted = new Map<string, UnlistedChanges>();
  const unlistedChanges = (): UnlistedChanges => {
    const queue = Context.current().info.taskQueue;
    let kept = unlisted.get(queue);
    if (!kept) unlisted.set(queue, (kept = new UnlistedChanges()));
    return kept;
  };
  /**
   * A tick that went on without the end of a move it tracks (its look at the closes still under way) is followed by
   * another once the look lists it: the loop and drains wake on a topology signal, as on a move's end.
   */
  const wakeOnEnds = (late: Promise<TrackedMove[]>): void => {
    const workflowId = Context.current().info.workflowExecution?.workflowId;
    if (workflowId === undefined) return;
    void late.then((missed) => {
      if (missed.length === 0) return;
      log?.debug({ workflowId, ends: missed.length }, 'ends listed after the tick went on: waking it');
      // A workflow that ended meanwhile needs no wake-up.
      deps.client.workflow
        .getHandle(workflowId)
        .signal(topologySignal, { event: 'assignment_changed', partition: missed[0]!.partition, seq: 0 })
        .catch((err: unknown) => log?.debug({ err, workflowId }, 'the wake-up after a late look was not delivered'));
    });
  };
  /** The planner's reading of the records of the topologies planned on, followed from tick to tick (planner/kept.ts). */
  const kept = new KeptReading();
  /** This worker's books of the moves in progress, per task queue (a loop and its drains each). */
  const running = new Map<string, RunningMoves>();
  const runningMoves = (): RunningMoves | null => {
    const taskQueue = current()?.taskQueue;
    if (taskQueue === undefined) return null;
    let book = running.get(taskQueue);
    if (!book) running.set(taskQueue, (book = new RunningMoves(deps.client, taskQueue, (err) => log?.warn({ err }, 'listing the moves in progress failed: the next tick lists them again'))));
    return book;
  };
  /** This worker's partition cooldowns, per task queue (one loop each). */
  const books = new Map<string, CooledMoves>();
  const cooledMoves = (): CooledMoves => {
    const queue = Context.current().info.taskQueue;
    let book = books.get(queue);
    if (!book) books.set(queue, (book = new CooledMoves(deps.client, queue)));
    return book;
  };
  /** The request's cooldowns with the book's partition cooldowns, when it asks for them (fresh within a tick). */
  const addCooledMoves = async <R extends { cooldowns: PlanInput['cooldowns']; cooled?: boolean }>(request: R, config: Pick<PlannerConfig, 'partitionCooldownMs'>): Promise<R> => {
    if (!request.cooled) return request;
    const moves = await cooledMoves().current(config.partitionCooldownMs, SAME_TICK_MS);
    return { ...request, cooldowns: withMoves(request.cooldowns, moves) };
  };
  return {
    /**
     * Every move in flight as the planner counts it, which tracked moves ended, what blocks planning and, from
     * `closedAfter` (epoch ms) on, every reconfiguration that completed on this task queue. What completed is also
     * kept, for `coolFor` (the partition cooldown), in this worker's book of partition cooldowns, which the loop's
     * plan reads (`cooled`), so the loop's state never holds them.
     */
    async rebalancerSnapshot(tracked: TrackedMove[], drainedNode?: string | null, closedAfter?: number, coolFor?: number): Promise<Snapshot> {
      const started = performance.now();
      const took: Record<string, number> = {};
      const timed = <T>(what: string, p: Promise<T>): Promise<T> =>
        p.then((v) => {
          took[what] = Math.round(performance.now() - started);
          return v;
        });
      const readAt = Date.now();
      const reads = [timed('topologyMs', deps.cluster.topology()), timed('budgetMs', deps.cluster.syncBudget())] as const;
      // Temporal's lists are waited for as long as the broker's reads take, and a little more (`listedWithin`).
      const enough = Promise.allSettled(reads).then(() => new Promise((r) => setTimeout(r, LIST_GRACE_MS)));
      const [topology, budget, { ends, bookMs, described, late }, looked] = await Promise.all([
        ...reads,
        timed('endsMs', endsOf(deps.client, tracked, runningMoves(), enough)),
        closedAfter === undefined ? undefined : timed('closedMs', cooledMoves().look(coolFor ?? DEFAULT_PLANNER_CONFIG.partitionCooldownMs, closedAfter, enough)),
      ]);
      if (late !== null) wakeOnEnds(late);
      const closed = looked?.closed;
      let held: string[] = [];
      if (looked !== undefined) {
        const unlisted = unlistedChanges();
        unlisted.read(readAt, topology);
        held = unlisted.since(looked.listedFrom, topology);
      }
      remember(topology, held);
      const ended = ends.filter((e): e is EndedMove => e !== null);
      if (closed !== undefined) {
        // The loop's own moves, from Temporal's record of each: visibility may list one only a little later.
        const completed = new Set(ended.filter((e) => e.status === 'completed').map((e) => e.runId));
        const at = Date.now();
        const own = tracked.filter((m) => completed.has(m.runId)).map((m) => ({ partition: m.partition, from: m.from, to: m.to, closedAt: at }));
        cooledMoves().record(own, coolFor ?? DEFAULT_PLANNER_CONFIG.partitionCooldownMs);
      }
      const endedRuns = new Set(ended.map((e) => e.runId));
      // From the model's records not at rest, not a pass over every record (cluster/derived.ts).
      const records = notAtRest(topology.partitions, tracked.map((m) => m.partition)) ?? topology.partitions;
      const snapshot: Snapshot = {
        inFlight: inFlightMoves(records, tracked.filter((m) => !endedRuns.has(m.runId)), budget.transfers),
        ended,
        recoveryPending: recoveryPending(records),
        draining: topology.nodes.filter((n) => n.draining).map((n) => n.id),
        active: activeNodes(topology),
        // Null from the loop: an absent argument arrives as null through the payload converter.
        left: drainedNode == null ? null : drainLeft(topology, drainedNode),
        ...(closed === undefined ? {} : { closed }),
        ...(closed === undefined ? {} : { cooling: cooledMoves().count() }),
      };
      // The tick's cost at size (docs/scale.md): the topology read and the rest.
      log?.debug({ ms: Math.round(performance.now() - started), ...took, bookMs, described, wentOn: late !== null || looked?.listed === false, held: held.length, tracked: tracked.length, partitions: topology.partitions.length }, 'snapshot');
      return snapshot;
    },

    /** Whether the node can be drained at all (its queues only, when asked), from a fresh topology. */
    async checkNodeDrain(node: string, queuesOnly = false): Promise<DrainCheck> {
      return checkDrain(await deps.cluster.topology(), node, queuesOnly);
    },

    /**
     * The planner on the topology of this tick's snapshot (its own recovery pause and cooldowns included), leaving
     * alone what another drain holds: the loop plans the rest of the cluster while a drain runs.
     */
    async planMoves(request: PlanRequest, config: PlannerConfig): Promise<DrainPlan> {
      const started = performance.now();
      const { topology, held } = await topologyOfThisTick();
      // A loop or drain started before a setting existed carries settings without it: the default fills it in.
      const settings = { ...DEFAULT_PLANNER_CONFIG, ...config };
      const plan = deps.plan(planInputFor(topology, holding(await addCooledMoves(request, settings), held)), settings, kept);
      log?.debug({ steps: plan.steps.length, idleReason: plan.idleReason, planningMs: plan.planningMs, ms: Math.round(performance.now() - started), reading: kept.counts }, 'planned');
      if (!request.drain) return plan;
      return { ...plan, blockers: drainBlockers(topology, request.drain.node, plan.steps, request.inFlight, config, request.drain.queuesOnly) };
    },

    /**
     * Propose mode: the planner's steps to convergence on a fresh topology (the moves the loop tracks counted in
     * flight), with the topology generation and the basis its steps are judged stale against at approval.
     */
    async proposePlan(
      request: { tracked: TrackedMove[]; cooldowns: PlanInput['cooldowns']; now: number; cooled?: boolean } & Pick<PlanInput, 'pinned' | 'excluded'>,
      config: PlannerConfig,
    ): Promise<{ plan: Plan; generation: number; basis: PlanBasis }> {
      const [topology, budget] = await Promise.all([deps.cluster.topology(), deps.cluster.syncBudget()]);
      const { tracked, cooled: _cooled, ...rest } = await addCooledMoves(request, config);
      const plan = firstSteps(planToConvergence(planInputFor(topology, { ...rest, inFlight: inFlightMoves(topology.partitions, tracked, budget.transfers) }), config), config);
      log?.debug({ steps: plan.steps.length, idleReason: plan.idleReason, generation: topology.generation }, 'proposed');
      return { plan, generation: topology.generation, basis: basisOf(topology, plan.steps) };
    },

    /** Propose mode, at approval: which of the plan's steps are stale on a fresh topology, and why. */
    async checkPlanSteps(plan: Pick<ProposedPlan, 'steps' | 'basis'>, holds: Holds = {}): Promise<{ fresh: ProposedPlan['steps']; stale: StaleStep[] }> {
      return staleSteps(plan, await deps.cluster.topology(), holds);
    },

    async configuredSettings(): Promise<RebalancerSettings> {
      if (!deps.settings) {
        throw ApplicationFailure.nonRetryable('this worker has no rebalancer settings: start the drain with its own settings', 'NoSettings');
      }
      return deps.settings;
    },

    /** Guarded on the broker's side (idempotent: setting the mark a node has changes nothing). */
    async setNodeDraining(node: string, draining: boolean, reason: string): Promise<void> {
      await deps.setDraining(node, draining, reason);
      log?.info({ node, draining, reason }, draining ? `${node} marked draining` : `${node} no longer draining`);
    },
  };
}

export type RebalancerActivities = ReturnType<typeof createRebalancerActivities>;
