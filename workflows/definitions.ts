/**
 * The one module of signals, queries, updates and payload types shared by workflows, the progress relay
 * and clients. Deterministic and free of Node built-ins: it is bundled into the workflow sandbox.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';

/** Who asked for a move: an operator's move waits out a recovery and retries; a planner's ends. */
export type MoveOrigin = 'operator' | 'planner';

export interface FollowerMoveRequest {
  partition: string;
  /** R: the follower whose copy moves away. */
  from: string;
  /** T: the node that receives the copy. */
  to: string;
  origin: MoveOrigin;
  /** Overrides of the move's timing; defaults in follower-move.ts. */
  timing?: Partial<MoveTiming>;
}

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
}

export type MovePhase =
  | 'validating'
  | 'adding_learner'
  | 'catching_up'
  | 'swapping'
  | 'covering_boundary'
  | 'removing'
  | 'waiting_for_recovery'
  | 'cleaning_up'
  | 'completed'
  | 'cancelled'
  | 'aborted';

export type MoveOutcome =
  | { status: 'completed'; partition: string; from: string; to: string; boundary: number; epoch: number }
  | { status: 'cancelled'; partition: string; reason: string }
  | { status: 'aborted'; partition: string; code: string; reason: string };

export interface MoveStatus {
  kind: 'follower-move';
  partition: string;
  from: string;
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
}

/** Durable progress of the partition's replicas; the workflow keeps the maximum it has seen. */
export interface ProgressSignal {
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

/** One running reconfiguration per partition: Temporal refuses a second workflow with the same id. */
export function reconfigurationWorkflowId(partition: string): string {
  return `reconfigure-${partition}`;
}
