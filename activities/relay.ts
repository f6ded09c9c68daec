/**
 * The progress relay's activity: reads the broker's event feed and turns events into signals to the
 * partition's workflow, and changes of the cluster (nodes joining, going up or down, draining; recoveries)
 * into topology signals to the rebalancer and the node's drain. Delivery is at least once: the cursor is heartbeated only once the signals of a page
 * went out, and a retried run (worker killed, heartbeat timed out) resumes from the last heartbeat. Workflows
 * are idempotent about repeats (progress is a maximum, liveness carries the feed sequence). Progress is
 * coalesced per partition and throttled, to a budget of signals per second over all partitions, except when a
 * replica crosses the switch boundary, which is what a move waits for. Signals to one workflow, and signals about
 * one node, go out in feed order.
 */
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { SignalDefinition } from '@temporalio/workflow';
import type { Logger } from 'pino';
import type { ClusterClient } from '../cluster/client';
import type { ClusterEvent } from '../cluster/contract';
import { relayScope } from '../operations/relay';
import {
  admittedSignal,
  drainWorkflowId,
  nodeSignal,
  progressSignal,
  rebalancerWorkflowId,
  reconfigurationWorkflowId,
  recoverySignal,
  topologySignal,
  type NodeSignal,
  type ProgressSignal,
  type TopologySignal,
} from '../rules/definitions';
import type { RelayRun } from '../rules/relay';
import { SourceKey, TargetKey } from '../rules/search-attributes';

export interface RelayDeps {
  cluster: Pick<ClusterClient, 'events' | 'baseUrl'>;
  client: Pick<Client, 'workflow'>;
  logger?: Logger;
  /**
   * Tests and benchmarks only, in process: runs after each signal went out, so a test can slow a delivery or stop a
   * worker mid-page, and the moves benchmark can time the relay.
   */
  afterSignal?: (sent: SentSignal) => Promise<void>;
}

/** One page of the feed: the events after cursor `after`. */
export interface RelayPage {
  after: number;
  events: number;
}

export interface SentSignal {
  workflowId: string;
  signal: string;
  page: RelayPage;
  /** How many signals of this page went out so far, this one included. */
  inPage: number;
}

type ProgressEvent = Extract<ClusterEvent, { type: 'progress' }>;
type AssignmentChanged = Extract<ClusterEvent, { type: 'assignment_changed' }>;

/** Sends one signal; a workflow that does not run is skipped. */
type Send = <Args extends unknown[]>(workflowId: string, def: SignalDefinition<Args>, ...args: Args) => Promise<void>;

interface Sent {
  at: number;
  covering: number;
}

/** How many replicas are durable at or beyond the switch boundary: a rise is what a move waits for. */
function covering(e: ProgressEvent): number {
  return e.boundary === null ? 0 : e.replicas.filter((r) => r.durableOffset >= e.boundary!).length;
}

/**
 * Progress signals the relay sends per second at most, over all partitions (boundary crossings aside, which go out at
 * once): each is a history event the server writes and a worker takes in. At 1,000 moves in flight one signal per
 * partition every 5 s was 10.7 signals per move and minute, most of each move's history; with the budget 3.9
 * (docs/scale.md). A move far from its boundary hears of its progress less often.
 */
export const PROGRESS_SIGNALS_PER_SECOND = 50;

/** Least time between two progress signals to one partition while `active` partitions report progress. */
export function progressInterval(run: Pick<RelayRun, 'progressIntervalMs'>, active: number): number {
  return Math.max(run.progressIntervalMs, (1000 * active) / PROGRESS_SIGNALS_PER_SECOND);
}

function isCursor(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/**
 * Writes that end a change in flight or free a transfer slot: a drain that waits on another partition's change or
 * on the sync budget is told, rather than waiting for its next tick.
 */
const FREES_A_CHANGE: ReadonlySet<string> = new Set(['swap', 'drop-learner', 'remove-leaving', 'promote-learner', 'reopen-admission']);

/** One activity run: its throttle state lives in memory, its cursor in heartbeats. */
class FeedRun {
  private cursor: number;
  private failures = 0;
  private readonly sent = new Map<string, Sent>();
  /** Progress held back by the throttle, sent once its interval has passed. */
  private readonly held = new Map<string, ProgressEvent>();

  /** The rebalancer of this relay's broker and task queue. */
  private readonly rebalancer: string;

  constructor(
    private readonly deps: RelayDeps,
    private readonly run: RelayRun,
    private readonly ctx: Context,
    start: number,
    private readonly log: Logger | undefined,
  ) {
    this.cursor = start;
    this.rebalancer = rebalancerWorkflowId(relayScope(run.brokerUrl, ctx.info.taskQueue));
  }

  /** Where a successor must resume: before the oldest progress still held back, so nothing is skipped. */
  resumeAt(): number {
    let at = this.cursor;
    for (const e of this.held.values()) at = Math.min(at, e.seq - 1);
    return at;
  }

  async relay(): Promise<number> {
    const until = Date.now() + this.run.runMs;
    while (Date.now() < until) {
      this.ctx.heartbeat(this.resumeAt());
      try {
        const after = this.cursor;
        const page = await Promise.race([
          this.deps.cluster.events(after, { waitMs: this.held.size > 0 ? 200 : this.run.pollWaitMs, limit: 2_000 }),
          this.ctx.cancelled,
        ]);
        await this.deliver({ after, events: page.events.length }, page.events, false);
        this.cursor = page.cursor;
        this.failures = 0;
        if (page.events.length > 0) await this.ctx.sleep(this.run.batchMs);
      } catch (err) {
        if (this.ctx.cancellationSignal.aborted) throw err;
        this.failures += 1;
        if (this.failures === 1 || this.failures % 20 === 0) {
          this.log?.warn({ err: (err as Error).message, failures: this.failures, cursor: this.cursor }, 'relay could not read or deliver events; retrying');
        }
        await this.ctx.sleep(Math.min(5_000, 200 * this.failures));
      }
    }
    // Progress still held goes out now, so the cursor handed back owes nothing.
    await this.deliver({ after: this.cursor, events: 0 }, [], true);
    this.ctx.heartbeat(this.cursor);
    return this.cursor;
  }

  private async deliver(page: RelayPage, events: ClusterEvent[], flush: boolean): Promise<void> {
    let sentInPage = 0;
    const send: Send = async (workflowId, def, ...args) => {
      // A cancelled run (worker stopping) sends nothing more: its successor delivers the page again.
      this.ctx.cancellationSignal.throwIfAborted();
      try {
        await this.deps.client.workflow.getHandle(workflowId).signal(def, ...args);
      } catch (err) {
        // A workflow that does not run (no move, or it already ended) has nothing to be told.
        if (err instanceof WorkflowNotFoundError) return;
        throw err;
      }
      sentInPage += 1;
      this.ctx.heartbeat(this.resumeAt());
      await this.deps.afterSignal?.({ workflowId, signal: def.name, page, inPage: sentInPage });
    };
    // One chain per workflow and per node: each keeps feed order, the chains run side by side.
    const chains = new Map<string, Promise<void>>();
    const queue = (key: string, step: () => Promise<void>) => chains.set(key, (chains.get(key) ?? Promise.resolve()).then(step));
    const move = reconfigurationWorkflowId;
    for (const e of events) {
      switch (e.type) {
        case 'progress':
          this.held.set(e.partition, e);
          break;
        case 'admitted':
          queue(move(e.partition), () => send(move(e.partition), admittedSignal, { node: e.node, generation: e.generation }));
          break;
        case 'recovery_opened':
          queue(move(e.partition), () => send(move(e.partition), recoverySignal, { state: 'opened', epoch: e.epoch }));
          break;
        case 'recovery_activated':
          queue(move(e.partition), () =>
            send(move(e.partition), recoverySignal, { state: 'activated', epoch: e.epoch, owner: e.owner, generation: e.generation }),
          );
          break;
        case 'node_down':
        case 'node_up': {
          const signal: NodeSignal & { seq: number } = { node: e.node, live: e.type === 'node_up', seq: e.seq };
          queue(`node ${e.node}`, async () => {
            for (const id of await this.movesOn(e.node)) await send(id, nodeSignal, signal);
          });
          break;
        }
        default:
          break;
      }
      this.topologyChange(e, queue, send);
    }
    const ended = events.filter((e): e is AssignmentChanged => e.type === 'assignment_changed' && FREES_A_CHANGE.has(e.write)).at(-1);
    if (ended !== undefined) {
      // One visibility look per page: a drain blocked on another change or on the budget plans again at once.
      const signal: TopologySignal = { event: 'assignment_changed', partition: ended.partition, seq: ended.seq };
      queue('drains', async () => {
        for (const id of await this.runningDrains()) await send(id, topologySignal, signal);
      });
    }
    const now = Date.now();
    const interval = progressInterval(this.run, this.held.size);
    for (const [partition, e] of this.held) {
      const last = this.sent.get(partition);
      const count = covering(e);
      if (!flush && last && now - last.at < interval && count <= last.covering) continue;
      this.sent.set(partition, { at: now, covering: count });
      const payload: ProgressSignal = { at: e.at, generation: e.generation, confirmedTail: e.confirmedTail, boundary: e.boundary, replicas: e.replicas };
      // Held until sent, so a heartbeat meanwhile still resumes before it.
      queue(move(partition), async () => {
        await send(move(partition), progressSignal, payload);
        if (this.held.get(partition) === e) this.held.delete(partition);
      });
    }
    await Promise.all(chains.values());
  }

  /**
   * A change the rebalancer reacts to goes to it; a node's change also goes to that node's drain. Each target
   * has its own chain, so it hears its events in feed order.
   */
  private topologyChange(e: ClusterEvent, queue: (key: string, step: () => Promise<void>) => void, send: Send): void {
    let signal: TopologySignal;
    switch (e.type) {
      case 'node_joined':
      case 'node_up':
      case 'node_down':
      case 'node_draining':
        signal = { event: e.type, node: e.node, seq: e.seq };
        break;
      case 'recovery_opened':
      case 'recovery_activated':
        signal = { event: e.type, partition: e.partition, seq: e.seq };
        break;
      default:
        return;
    }
    const targets = [this.rebalancer];
    if (signal.node !== undefined) targets.push(drainWorkflowId(signal.node));
    for (const id of targets) queue(id, () => send(id, topologySignal, signal));
  }

  /** The drains running on this relay's task queue, found through visibility. */
  private async runningDrains(): Promise<string[]> {
    const query = `ExecutionStatus = "Running" AND WorkflowId STARTS_WITH "${drainWorkflowId('')}" AND TaskQueue = ${JSON.stringify(this.ctx.info.taskQueue)}`;
    const ids: string[] = [];
    for await (const wf of this.deps.client.workflow.list({ query })) ids.push(wf.workflowId);
    return ids;
  }

  /** The running moves whose source or target is `node`, found through visibility. */
  private async movesOn(node: string): Promise<string[]> {
    const query = `ExecutionStatus = "Running" AND (${TargetKey.name} = "${node}" OR ${SourceKey.name} = "${node}")`;
    const ids: string[] = [];
    for await (const wf of this.deps.client.workflow.list({ query })) ids.push(wf.workflowId);
    return ids;
  }
}

export function createRelayActivities(deps: RelayDeps) {
  const log = deps.logger?.child({ component: 'relay' });
  return {
    /** Relays the feed from `run.cursor` (or the last heartbeat of an earlier attempt) for runMs; returns the cursor. */
    async relayFeed(run: RelayRun): Promise<number> {
      if (run.brokerUrl !== deps.cluster.baseUrl) {
        // Retryable: another worker on the task queue may be the one configured for that broker.
        throw ApplicationFailure.retryable(
          `this worker's broker is ${deps.cluster.baseUrl}, but the relay run is for ${run.brokerUrl}: workers on one task queue need the same CLUSTER_URL`,
          'WrongBroker',
        );
      }
      const ctx = Context.current();
      const saved: unknown = ctx.info.heartbeatDetails;
      const start = isCursor(saved) ? saved : run.cursor;
      if (ctx.info.attempt > 1) log?.info({ cursor: start, attempt: ctx.info.attempt }, 'progress relay resumed from its last heartbeat');
      const feed = new FeedRun(deps, run, ctx, start, log);
      try {
        return await feed.relay();
      } catch (err) {
        // A cancel means this worker stops (or lost the run to a timeout, and then the answer is ignored):
        // hand back where delivery stands, so the next run starts at once on a worker that is left. Reported
        // as cancelled, the run would end the relay workflow.
        if (!ctx.cancellationSignal.aborted) throw err;
        log?.info({ cursor: feed.resumeAt() }, 'progress relay run handed back: this worker stops');
        return feed.resumeAt();
      }
    },
  };
}

export type RelayActivities = ReturnType<typeof createRelayActivities>;
