/**
 * The one module of signals, queries, updates and payload types shared by workflows, the progress relay
 * and clients. Deterministic and free of Node built-ins: it is bundled into the workflow sandbox.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { Cooldowns, PlannerConfig, Proposal, ProposalOp } from '../planner/types';

/** Who asked for a move: an operator's move waits out a recovery and retries; a planner's ends. */
export type MoveOrigin = 'operator' | 'planner';

export interface FollowerMoveRequest {
  partition: string;
  /** R: the follower whose copy moves away. */
  from: string;
  /** T: the node that receives the copy. */
  to: string;
  origin: MoveOrigin;
  /** Why it was asked for (the operator's --reason), kept in the workflow's input. */
  reason?: string;
  /** Overrides of the move's timing; defaults in DEFAULT_TIMING (steps/watch.ts) and SWAP_BACK_AFTER_MS (steps/swap.ts). */
  timing?: Partial<MoveTiming>;
}

/**
 * The reconfigurations of one partition, each its own workflow type (workflow id `reconfigure-<partition>`,
 * so at most one runs per partition) and the value of the `RebalanceKind` search attribute.
 */
export type ReconfigurationKind = 'follower-move' | 'owner-handoff' | 'owner-move' | 'grow' | 'replace';

/** Planned owner handoff from the owner A to D, an admitted, caught-up follower. */
export interface HandoffRequest {
  partition: string;
  /** A: the owner as the requester saw it; the handoff ends if another node owns the partition. */
  from: string;
  /** D: the follower that becomes owner. */
  to: string;
  origin: MoveOrigin;
  /** Why it was asked for (the operator's --reason), kept in the workflow's input. */
  reason?: string;
  quietPoint?: Partial<QuietPoint>;
  timing?: Partial<MoveTiming>;
}

/** When to close admission: the partition is quiet when few messages are in flight (tail - confirmed tail). */
export interface QuietPoint {
  /** Quiet when at most this many messages are published but not yet confirmed. */
  maxInFlight: number;
  /** Wait at most this long for a quiet point (the bound), then close admission anyway. */
  maxWaitMs: number;
  /**
   * Keep admission closed at most this long waiting for the counted copies to be durable at the final
   * boundary; past it the handoff reopens admission on the old owner and ends (stalled). Default in owner-handoff.ts.
   */
  maxClosedMs?: number;
}

/** Owner move onto T, not yet a replica: a follower move of `via` to T, then a handoff from A to T. */
export interface OwnerMoveRequest {
  partition: string;
  /** A: the owner. */
  from: string;
  /** T: the node that becomes owner. */
  to: string;
  /** The follower whose copy moves to T first; the workflow picks one when absent (and says which). */
  via?: string;
  origin: MoveOrigin;
  /** Why it was asked for (the operator's --reason), kept in the workflow's input. */
  reason?: string;
  quietPoint?: Partial<QuietPoint>;
  timing?: Partial<MoveTiming>;
}

/** Replication-factor increase: step 0 on T, then promote T and raise the replication factor together. */
export interface GrowRequest {
  partition: string;
  to: string;
  origin: MoveOrigin;
  /** Why it was asked for (the operator's --reason), kept in the workflow's input. */
  reason?: string;
  timing?: Partial<MoveTiming>;
}

/** Lost follower L replaced by T: step 0 on T, swap, then remove L once T covers the boundary. */
export interface ReplaceRequest {
  partition: string;
  lost: string;
  with: string;
  origin: MoveOrigin;
  /** Why it was asked for (the operator's --reason), kept in the workflow's input. */
  reason?: string;
  timing?: Partial<MoveTiming>;
}

export type ReconfigurationRequest =
  | ({ kind: 'follower-move' } & FollowerMoveRequest)
  | ({ kind: 'owner-handoff' } & HandoffRequest)
  | ({ kind: 'owner-move' } & OwnerMoveRequest)
  | ({ kind: 'grow' } & GrowRequest)
  | ({ kind: 'replace' } & ReplaceRequest);

export interface MoveTiming {
  /** No learner progress for this long: the blocking reason says stalled. */
  stallReportMs: number;
  /** No learner progress for this long, before the swap: abort cleanly. */
  stallAbortMs: number;
  /** Catch-up deadline = catchUpBaseMs + bytes to copy / catchUpFloorBytesPerSec. */
  catchUpBaseMs: number;
  catchUpFloorBytesPerSec: number;
  /** Re-read the broker this often while waiting, in case events were delayed or dropped. */
  pollMs: number;
  /** Wait between tries of a write the broker refused for a passing reason (budget, generation, ...). */
  retryMs: number;
  /** T down this long after the swap: the follower move swaps back (default in steps/swap.ts, SWAP_BACK_AFTER_MS). */
  swapBackAfterMs?: number;
}

export type MovePhase =
  | 'validating'
  | 'adding_learner'
  | 'catching_up'
  | 'swapping'
  | 'covering_boundary'
  | 'removing'
  | 'promoting'
  | 'waiting_for_quiet_point'
  | 'closing_admission'
  | 'waiting_for_final_boundary'
  | 'committing_owner'
  | 'reopening_admission'
  | 'waiting_for_recovery'
  | 'cleaning_up'
  | 'completed'
  | 'cancelled'
  | 'aborted';

/**
 * How a reconfiguration ended. Every reconfiguration type also ends in the matching Temporal status: completed returns the outcome; cancelled throws a CancelledFailure
 * whose details[0] is the outcome (Canceled); aborted throws ApplicationFailure.nonRetryable(reason, code,
 * outcome) (Failed, typed by the code). Clients read the outcome from either.
 */
export type MoveOutcome =
  | {
      status: 'completed';
      kind?: ReconfigurationKind;
      partition: string;
      /** The node that gave up the copy (or the owner role); null for a replication-factor increase. */
      from: string | null;
      to: string;
      /** Switch boundary B of a swap; null when the operation had no swap. */
      boundary: number | null;
      epoch: number;
      /** Owner handoff: the final boundary and how long admission stayed closed. */
      finalBoundary?: number;
      admissionClosedMs?: number;
      /** Plain words on what else happened: admission closed without a quiet point, a recovery after a handoff's commit, ... */
      note?: string;
    }
  | { status: 'cancelled'; kind?: ReconfigurationKind; partition: string; reason: string }
  | { status: 'aborted'; kind?: ReconfigurationKind; partition: string; code: string; reason: string };

export interface MoveStatus {
  kind: ReconfigurationKind;
  partition: string;
  /** The node giving up a copy or the owner role; null for a replication-factor increase. */
  from: string | null;
  to: string;
  origin: MoveOrigin;
  phase: MovePhase;
  /** Bytes T still has to copy before it is caught up; null before T is a learner. */
  bytesRemaining: number | null;
  /** Switch boundary B, once the swap happened. */
  boundary: number | null;
  /** T's durable offset as last reported. */
  targetDurable: number | null;
  /** Plain words: what the move waits for right now, or null when it is not waiting. */
  blockingReason: string | null;
  epoch: number | null;
  generation: number | null;
  /** How often a step was tried again after a passing refusal or a recovery. */
  retries: number;
  outcome: MoveOutcome | null;
  /** Owner handoff: the final boundary once admission closed. */
  finalBoundary?: number | null;
  /** Owner handoff: how long admission has been closed (so far, or in all once reopened). */
  admissionClosedMs?: number | null;
  /** Owner move: the follower whose copy moves to T, and which stage runs now. */
  via?: string | null;
  stage?: 'follower_move' | 'handoff' | null;
}

/** Durable progress of the partition's replicas; the workflow keeps the maximum it has seen. */
export interface ProgressSignal {
  /** The event's time on the broker's clock (absent from relays before it was sent): stamps the progress. */
  at?: number;
  generation: number;
  confirmedTail: number;
  boundary: number | null;
  replicas: {
    node: string;
    durableOffset: number;
    bytesRemaining: number;
    stalled: boolean;
    /** The broker paused this rebalancing transfer so recovery transfers on the node go first. */
    pausedForRecovery?: boolean;
  }[];
}
export interface AdmittedSignal {
  node: string;
  generation: number;
}
export interface RecoverySignal {
  state: 'opened' | 'activated';
  epoch: number;
  owner?: string;
  generation?: number;
}
export interface NodeSignal {
  node: string;
  live: boolean;
  /**
   * Feed sequence of the node_up/node_down event: a signal older than one already seen for the node is
   * ignored (the relay sends them concurrently). Absent from old senders: such a signal is applied as is.
   */
  seq?: number;
}
export interface CancelRequest {
  reason: string;
}

export const progressSignal = defineSignal<[ProgressSignal]>('progress');
export const admittedSignal = defineSignal<[AdmittedSignal]>('admitted');
export const recoverySignal = defineSignal<[RecoverySignal]>('recovery');
export const nodeSignal = defineSignal<[NodeSignal]>('node');
export const statusQuery = defineQuery<MoveStatus>('status');
/** Operator cancel: accepted before the swap (the learner is dropped); refused after it, with the way on. */
export const cancelUpdate = defineUpdate<{ accepted: true; phase: MovePhase }, [CancelRequest]>('cancel');

/** What every reconfiguration's workflow id starts with: visibility lists them by it. */
export const RECONFIGURATION_ID_PREFIX = 'reconfigure-';

/** One running reconfiguration per partition: Temporal refuses a second workflow with the same id. */
export function reconfigurationWorkflowId(partition: string): string {
  return `${RECONFIGURATION_ID_PREFIX}${partition}`;
}

/** The workflow type each kind of reconfiguration runs as: the one table the starters and the loop start from. */
export const WORKFLOW_TYPE = {
  'follower-move': 'followerMoveV3',
  'owner-handoff': 'ownerHandoff',
  'owner-move': 'ownerMove',
  grow: 'replicationIncrease',
  replace: 'followerReplacement',
} as const satisfies Record<ReconfigurationKind, string>;

/**
 * A change of the cluster the rebalancer and drains react to, sent by the progress relay from the broker's
 * event feed (node_joined, node_up, node_down, a node's draining mark, a recovery opened or activated anywhere).
 */
export interface TopologySignal {
  /** `assignment_changed`: a change in flight ended or a transfer slot freed (sent to drains only). */
  event: 'node_joined' | 'node_up' | 'node_down' | 'node_draining' | 'recovery_opened' | 'recovery_activated' | 'assignment_changed';
  node?: string;
  partition?: string;
  /** Feed sequence: a signal older than one already seen is stale. */
  seq: number;
}
export const topologySignal = defineSignal<[TopologySignal]>('topology');

/**
 * The one rebalancer per broker and task queue; `scope` is the same hash of broker URL and task queue that names
 * the progress relay (`progress-relay-<scope>`).
 */
export function rebalancerWorkflowId(scope: string): string {
  return `rebalancer-${scope}`;
}

/** One drain per node. */
export function drainWorkflowId(node: string): string {
  return `drain-${node}`;
}

// ---------------------------------------------------------------- the rebalancer loop and drain

/** What the loop runs on: the planner's policy plus the loop's own pacing (validated at worker start). */
export interface RebalancerSettings {
  planner: PlannerConfig;
  /** Plan again after this long without a topology signal or an ended move. */
  tickMs: number;
  /** Continue as new after this many ticks (or sooner, when Temporal suggests it). */
  ticksPerRun: number;
  /** `propose`: the loop publishes its plan and starts only approved steps. Absent (older runs): `auto`. */
  mode?: RebalancerMode;
}

/** Who paused or resumed the loop and why, as the update recorded it (`at`: workflow clock, epoch ms). */
export interface OperatorNote {
  by: string;
  reason: string;
  at: number;
}
export interface PauseRequest {
  /** Who asks: an operator's name or a tool's; refused when empty. */
  by: string;
  /** Why, in words; refused when empty. */
  reason: string;
}

/** A reconfiguration the loop or a drain started and has not yet seen end. */
export interface TrackedMove {
  partition: string;
  op: ProposalOp;
  from: string;
  to: string;
  workflowId: string;
  runId: string;
  startedAt: number;
  /** Bytes the planner expected the move to copy. */
  bytes: number;
  reason: string;
}

/** How a tracked move ended, as Temporal and the move's outcome tell it. */
export interface EndedMove {
  workflowId: string;
  runId: string;
  status: 'completed' | 'cancelled' | 'aborted';
  /** The outcome's reason or code, when the move did not complete. */
  detail: string | null;
}

/** The last plan the loop (or a drain) asked for, and what became of its steps. */
export interface PlanRecord {
  at: number;
  /** The plan's first steps (rules/rebalancer-rules.ts PLAN_RECORD_STEPS). */
  steps: Proposal[];
  /** How many steps the plan had, when more than `steps` keeps. */
  stepCount?: number;
  /** Partitions whose step started a move. */
  started: string[];
  /** Steps not started, each with why (a reconfiguration already runs, a limit, a draining node). */
  skipped: { partition: string; reason: string }[];
  /** Why no move started on this tick, or null when one did. */
  idleReason: string | null;
  spreadBefore: number;
  spreadAfter: number;
  mean: number;
  threshold: number;
  planningMs: number;
}

export type { Cooldowns };

/** Everything the loop carries across continue-as-new. */
export interface RebalancerState {
  paused: OperatorNote | null;
  lastResumed: OperatorNote | null;
  inFlight: TrackedMove[];
  cooldowns: Cooldowns;
  ticks: number;
  lastPlan: PlanRecord | null;
  /** Feed sequence of the newest topology signal seen. */
  lastSignalSeq: number;
  /** When the loop last listed the reconfigurations that closed; absent in a state from an older run. */
  lookedAt?: number;
  /** The nodes the mean was over at the last tick (live, not draining); absent in a state from an older run. */
  activeNodes?: string[];
  /** When a node last arrived among them: reconfigurations closed before then cool no node. */
  nodeCooldownsFrom?: number;
  /** Partitions cooling after a completed reconfiguration at the last tick, kept by the worker (not in `cooldowns`). */
  cooling?: number;
  moves: { started: number; completed: number; cancelled: number; aborted: number };
  /** Moves started, by op: each a planner decision the loop acted on. Absent in a state carried from an older run. */
  startedByOp?: Record<ProposalOp, number>;
  /** Partitions an operator pinned, by id: the loop proposes and starts nothing on them. Absent until the first pin. */
  pinned?: Record<string, OperatorNote>;
  /** Nodes an operator excluded, by id: the loop moves no copy or ownership onto or off them. Absent until the first. */
  excluded?: Record<string, OperatorNote>;
  /** Propose mode's plans; absent in auto mode and in a state carried from an older run. */
  approval?: ApprovalState;
}

export interface RebalancerInput {
  settings: RebalancerSettings;
  /** Absent on the first run; carried by continue-as-new. */
  state?: RebalancerState;
}

export interface RebalancerStatus extends RebalancerState {
  state: 'running' | 'paused';
  /** What the loop waits for right now: paused, a pending recovery, the next tick. */
  waitingFor: string;
  settings: RebalancerSettings;
  pinned: Record<string, OperatorNote>;
  excluded: Record<string, OperatorNote>;
}

export const rebalancerStatusQuery = defineQuery<RebalancerStatus>('rebalancerStatus');
/** Refused while paused already, and without who and why. */
export const pauseUpdate = defineUpdate<RebalancerStatus, [PauseRequest]>('pause');
/** Refused while running already, and without who and why. */
export const resumeUpdate = defineUpdate<RebalancerStatus, [PauseRequest]>('resume');

export interface PinRequest extends PauseRequest {
  partition: string;
}
export interface ExcludeRequest extends PauseRequest {
  node: string;
}
/** Refused without who and why, and for a partition pinned already; the caller checks the id against the broker. */
export const pinUpdate = defineUpdate<RebalancerStatus, [PinRequest]>('pin');
/** Refused without who and why, and for a partition that is not pinned. */
export const unpinUpdate = defineUpdate<RebalancerStatus, [PinRequest]>('unpin');
/** Refused without who and why, and for a node excluded already; the caller checks the id against the broker. */
export const excludeUpdate = defineUpdate<RebalancerStatus, [ExcludeRequest]>('exclude');
/** Refused without who and why, and for a node that is not excluded. */
export const includeUpdate = defineUpdate<RebalancerStatus, [ExcludeRequest]>('include');
// ---------------------------------------------------------------- approval (REBALANCER_MODE=propose)

/** `auto` starts what the planner proposes; `propose` publishes it as a plan and waits for `rebalancer approve`. */
export const REBALANCER_MODES = ['auto', 'propose'] as const;
export type RebalancerMode = (typeof REBALANCER_MODES)[number];

/** What a step's staleness is judged against: its partition's record version and its nodes as the plan saw them. */
export interface PlanBasis {
  partitions: Record<string, number>;
  nodes: Record<string, { live: boolean; draining: boolean }>;
}

/** A plan the loop published in propose mode: the planner's steps to convergence, waiting for approval. */
export interface ProposedPlan {
  id: string;
  /** Workflow clock, epoch ms. */
  madeAt: number;
  /** The topology generation the plan was made on. */
  generation: number;
  steps: Proposal[];
  /** Bytes the follower moves copy in all. */
  bytes: number;
  /** Time to carry the steps out under the transfer limits, at the nodes' sync rate. */
  predictedMs: number;
  spreadBefore: number;
  /** The spread once the plan to convergence is done (all its steps, `beyond` included). */
  spreadAfter: number;
  mean: number;
  basis: PlanBasis;
  /** Steps of the plan to convergence after these, proposed once these are done (activities/rebalancer.ts PROPOSAL_STEPS). */
  beyond?: number;
}

/** A step refused at approval, with why (its partition changed, a node went down or is draining, ...). */
export interface StaleStep {
  step: Proposal;
  reason: string;
}

/** A plan no longer pending, as an approval of its id is refused: approved (by whom, when) or superseded. */
export interface PastPlan {
  id: string;
  madeAt: number;
  generation: number;
  steps: number;
  state: 'approved' | 'superseded';
  /** Approved: who and why, and how many steps were accepted or refused as stale. */
  /**
   * Approved: who and why, how many steps were accepted, and those refused as stale: the first PAST_STALE_STEPS of
   * them (the list is part of the state the loop carries), with `refused` counting all (absent: the list is all).
   */
  approved?: OperatorNote & { accepted: number; stale: StaleStep[]; refused?: number };
  /** Superseded: who refreshed and why, and the plan that replaced it (null when the refresh found nothing to do). */
  superseded?: OperatorNote & { plan: string | null };
}

export interface ApprovalState {
  pending: ProposedPlan | null;
  /**
   * The approved plan's steps not yet started: they start under the transfer limits, over as many ticks as needed.
   * Kept, with no steps left, until its moves end: the next plan is made on the topology they leave.
   */
  approved: (Pick<ProposedPlan, 'spreadBefore' | 'spreadAfter' | 'mean'> & { planId: string; steps: Proposal[] }) | null;
  /** The latest plans no longer pending, newest first (a bounded list). */
  past: PastPlan[];
}

export interface ApproveRequest {
  planId: string;
  /** Who approves and why; refused when empty. */
  by: string;
  reason: string;
}

export interface ApprovalResult {
  planId: string;
  /** Steps queued to start, in the plan's order. */
  accepted: Proposal[];
  stale: StaleStep[];
  status: RebalancerStatus;
}

/** Refused (with the plan's state) for an unknown or used plan id, in auto mode, while paused, and without who and why. */
export const approvePlanUpdate = defineUpdate<ApprovalResult, [ApproveRequest]>('approvePlan');
export interface RefreshResult {
  /** The new pending plan, or null when the planner proposes nothing now. */
  plan: ProposedPlan | null;
  /** Why the planner proposes nothing, when it does not. */
  idleReason: string | null;
  /** The plan the refresh superseded, if one was pending. */
  superseded: string | null;
  status: RebalancerStatus;
}

/** A fresh proposal now, superseding the pending plan and any approved steps not yet started. */
export const refreshPlanUpdate = defineUpdate<RefreshResult, [PauseRequest]>('refreshPlan');

export interface DrainRequest {
  node: string;
  /** Who asked and why, kept in the drain's status. */
  by: string;
  reason: string;
  /**
   * Move every queue copy off the node and leave its stream copies (nothing may move a stream yet): the drain
   * then ends listing them. Absent or false: a node holding a stream copy is refused up front.
   */
  queuesOnly?: boolean;
  /** One line for the drain's status, e.g. that the node is excluded from rebalancing or holds pinned partitions. */
  notice?: string;
  /** Absent: the worker's configured settings, read once when the drain starts. */
  settings?: RebalancerSettings;
  /** Absent on the first run; carried by continue-as-new. */
  state?: DrainState;
}

export type DrainPhase = 'marking' | 'handing_off' | 'moving_followers' | 'finishing_moves' | 'clearing_mark' | 'completed' | 'cancelled' | 'refused';

export interface DrainState {
  phase: DrainPhase;
  inFlight: TrackedMove[];
  cooldowns: Cooldowns;
  ticks: number;
  moves: { started: number; completed: number; cancelled: number; aborted: number };
  /** Moves started on the planner's proposals, by op, since the drain began. Absent in a state from an older run. */
  startedByOp?: Record<ProposalOp, number>;
  /** When the drain began (workflow time), carried across continue-as-new: with the workflow id, names one drain. */
  since?: number;
}

export interface DrainStatus extends DrainState {
  node: string;
  by: string;
  reason: string;
  queuesOnly: boolean;
  /**
   * Queue partitions the node still holds a copy of (owned, followed, learning or leaving), and how many it owns.
   */
  partitionsLeft: number | null;
  ownedLeft: number | null;
  /** Retained history of those partitions, in bytes: what still has to be copied off the node. */
  bytesLeft: number | null;
  /** Streams the node holds a copy of: a drain of its queues only leaves them there. */
  streamsLeft: string[] | null;
  /**
   * What keeps the drain from progressing right now, in the note's words (empty when nothing does); a wait that
   * does not end by itself says so and what would end it.
   */
  blockingReasons: string[];
  /** The request's notice (the node is excluded from rebalancing, holds pinned partitions), or null. */
  notice: string | null;
  lastPlan: PlanRecord | null;
  outcome: DrainOutcome | null;
}

export type DrainOutcome =
  /** `streamsLeft`: only for a drain of the queues only, the streams it left on the node. */
  | { status: 'completed'; node: string; moves: number; streamsLeft?: string[] }
  | { status: 'cancelled'; node: string; reason: string; moves: number }
  | { status: 'refused'; node: string; code: string; reason: string };

export const drainStatusQuery = defineQuery<DrainStatus>('drainStatus');
