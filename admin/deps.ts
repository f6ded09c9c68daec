/**
 * What the admin API shows and does, each source behind one function, so the server is the same whatever
 * provides them: `createAdminDeps` wires the real ones (Temporal, the broker, the planner, the rebalancer), and
 * a test may replace one.
 */
import type { EventsPage, Topology, SyncBudget, InvariantsReport } from '../cluster/contract';
import type { ModelStats } from '../cluster/model';
import type { UnderReplicated } from '../planner/lost';
import type { Plan } from '../planner/types';
import type { ApprovalResult, MoveStatus, ProposedPlan, RebalancerMode, RebalancerStatus, ReconfigurationKind, ReconfigurationRequest, RefreshResult } from '../rules/definitions';
import type { HoldAction } from '../rules/rebalancer-rules';
import type { EndedMove, MoveDetail, MoveInProgress } from '../operations/moves';
import type { ScoredMove, ScoresView } from '../operations/scores';

/** The rebalancer loop as the admin API shows it (its status query, or `absent`); not the state the loop carries. */
export interface RebalancerView {
  /** `absent`: no rebalancer runs for this broker and task queue. */
  state: 'running' | 'paused' | 'absent';
  pausedBy: string | null;
  reason: string | null;
  /** ISO time of the last pause or resume, when known. */
  since: string | null;
  /** What the loop waits for right now (paused, a pending recovery, the next tick), when it says. */
  waitingFor: string | null;
  /** Moves the loop started since it first ran, by kind (its planner decisions); empty when no loop runs. */
  startedByKind: Partial<Record<ReconfigurationKind, number>>;
  /** `propose`: the loop waits for a plan's approval; null when no loop runs. */
  mode: RebalancerMode | null;
  /** Propose mode: the plan waiting for approval, without the basis its steps are judged by. */
  pendingPlan: Omit<ProposedPlan, 'basis'> | null;
  /** Propose mode: the approved plan whose steps are still starting or in flight, and how many are yet to start. */
  approved: { planId: string; stepsLeft: number } | null;
  /** Partitions the loop leaves alone, and nodes it moves nothing onto or off, each with who, why and since when. */
  pinned: HoldView[];
  excluded: HoldView[];
  /** Ticks of the loop since it first ran; null when no loop runs. */
  ticks: number | null;
  /** Present when the loop did not answer in time (busy): this is its last answer, given at this ISO time. */
  asOf?: string;
}

/** A pinned partition or an excluded node (`id`): who set it, why, and when (ISO). */
export interface HoldView {
  id: string;
  by: string;
  reason: string;
  since: string;
}

/** A move that ended, as the history keeps it: `outcome` is completed, cancelled or aborted, else how Temporal closed it. */
export interface EndedRun {
  runId: string;
  workflowId: string;
  partition: string;
  kind: ReconfigurationKind | null;
  from: string | null;
  to: string | null;
  /** Epoch ms. */
  closedAt: number;
  outcome: string;
}

/** Who asked and why: recorded by the workflow where it records it, and in the audit log. */
export interface Requester {
  actor: string;
  reason: string;
}

/** An operator's request of a reconfiguration, by kind; `origin` is always operator. */
export type OperatorRequest = ReconfigurationRequest extends infer R ? (R extends { origin: unknown } ? Omit<R, 'origin' | 'reason'> : never) : never;

export interface AdminDeps {
  /** The broker (its URL) and task queue this service shows. */
  source: { broker: string; taskQueue: string };
  /** Kept current from the broker's changes read (cluster/model.ts). */
  topology(): Promise<Topology>;
  /** How the topology was read so far: whole reads, changes reads, and records a whole read found drifted. */
  topologyReads(): ModelStats;
  syncBudget(): Promise<SyncBudget>;
  invariants(): Promise<InvariantsReport>;
  scores(topology: Topology, moves: readonly ScoredMove[]): ScoresView;
  plan(topology: Topology): Promise<Plan>;
  /** Partitions below their replication factor, the fewest live copies first, with the replacement running on each. */
  underReplicated(topology: Topology, moves: readonly Pick<MoveStatus, 'kind' | 'partition' | 'from' | 'to'>[]): UnderReplicated[];
  /** The reconfigurations in progress as visibility lists them, by partition: one list, no workflow asked. */
  moves(): Promise<MoveInProgress[]>;
  /**
   * Their statuses, each workflow queried: for the few a page shows. Within `withinMs`, those whose query has not
   * answered by then are `late` (a page shows their last answer, or them as visibility lists them); without, every
   * query is waited for. `onAnswer` hears each answer when it comes, a late one too.
   */
  statuses(
    moves: readonly MoveInProgress[],
    withinMs?: number,
    onAnswer?: (move: MoveInProgress, status: MoveStatus) => void,
  ): Promise<{ answered: MoveStatus[]; late: MoveInProgress[] }>;
  recentMoves(limit: number): Promise<EndedMove[]>;
  /** Moves of this task queue that ended after `since`; the outcome is read only of runs `known` does not know. */
  endedMoves(since: Date, known: (runId: string) => boolean): Promise<EndedRun[]>;
  show(partition: string): Promise<MoveDetail>;
  start(request: OperatorRequest, by: Requester): Promise<{ workflowId: string }>;
  cancel(partition: string, by: Requester): Promise<MoveStatus>;
  /** `queuesOnly`: leave the node's stream copies (see DrainRequest). */
  drain(node: string, by: Requester, options?: { queuesOnly: boolean }): Promise<{ workflowId: string }>;
  undrain(node: string, by: Requester): Promise<void>;
  rebalancer: {
    status(): Promise<RebalancerView>;
    /**
     * The loop's status query as it answers (what `rebalancer status --json` prints), or null when no loop runs; its last
     * answer with `asOf` (ISO) when it did not answer in time.
     */
    loop(): Promise<(RebalancerStatus & { asOf?: string }) | null>;
    pause(by: Requester): Promise<RebalancerView>;
    resume(by: Requester): Promise<RebalancerView>;
    /** Pin or unpin a partition, exclude or include a node (the id checked against the broker by the caller). */
    hold(action: HoldAction, id: string, by: Requester): Promise<RebalancerView>;
    approve(planId: string, by: Requester): Promise<Omit<ApprovalResult, 'status'>>;
    refresh(by: Requester): Promise<Omit<RefreshResult, 'status'>>;
  };
  /**
   * Moves each drain started on the planner's proposals, by kind: the drains running and those ended within the
   * last hour. `drain` names one drain (its workflow id and start), so a later drain of the node counts anew.
   */
  drainDecisions(): Promise<{ drain: string; startedByKind: Partial<Record<ReconfigurationKind, number>> }[]>;
  /** A page of the broker's event feed after `after`, at most `limit` events. */
  events(after: number, limit: number): Promise<EventsPage>;
  /** Events of the broker's feed the progress relay has not delivered yet; null when unknown. */
  relayLag(): Promise<number | null>;
}
