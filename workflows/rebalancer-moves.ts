/**
 * What the loop and drains share inside the workflow sandbox: the snapshot and planner activities, and how a
 * planned step becomes a reconfiguration that outlives its starter.
 */
import { WorkflowExecutionAlreadyStartedError, type Workflow } from '@temporalio/common';
import { ChildWorkflowCancellationType, ParentClosePolicy, patched, proxyLocalActivities, startChild, type ChildWorkflowHandle } from '@temporalio/workflow';
import type { RebalancerActivities } from '../activities/rebalancer';
import type { Proposal } from '../planner/types';
import {
  reconfigurationWorkflowId,
  type FollowerMoveRequest,
  type HandoffRequest,
  type MoveOrigin,
  type ReconfigurationKind,
  type ReplaceRequest,
  type TrackedMove,
  WORKFLOW_TYPE,
} from '../rules/definitions';
import { KindKey, PartitionKey, PhaseKey, PhaseSinceKey, SourceKey, TargetKey } from '../rules/search-attributes';

// Reads and planning are local activities: reading again or planning again after a crash is harmless, and
// neither needs a round trip through the server.
export const { rebalancerSnapshot, planMoves, configuredSettings, checkNodeDrain } = proxyLocalActivities<RebalancerActivities>({
  startToCloseTimeout: '60s',
  // Broker unreachable or restarting: keep trying.
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '15s' },
});

type StepRequest = FollowerMoveRequest | HandoffRequest | ReplaceRequest;

const moveRequest = (step: Proposal, origin: MoveOrigin): StepRequest => ({ partition: step.partition, from: step.from, to: step.to, origin, reason: step.reason });

/** The kind each planned operation runs as (its workflow type: WORKFLOW_TYPE), and its request. */
const RUNS_AS: Record<Proposal['op'], { kind: ReconfigurationKind; request: (step: Proposal, origin: MoveOrigin) => StepRequest }> = {
  follower_move: { kind: 'follower-move', request: moveRequest },
  owner_handoff: { kind: 'owner-handoff', request: moveRequest },
  // A repair is `rebalancer replace` started by the loop: the lost copy goes only once the new one covers the boundary.
  follower_replace: {
    kind: 'replace',
    request: (step, origin) => ({ partition: step.partition, lost: step.from, with: step.to, origin, reason: step.reason }),
  },
};

export type Started = { move: TrackedMove; handle: ChildWorkflowHandle<Workflow> } | { skipped: string };

/**
 * Executions that have it start a follower move as `followerMoveV3` (the step library's patches folded: 16 fewer
 * history events a move, 8 fewer visibility writes); before, as `followerMoveV2`. Replay compares a child's type.
 */
export const FOLLOWER_MOVE_V3 = 'follower-move-v3';

/** The workflow type a kind starts as in this execution. */
function typeOf(kind: ReconfigurationKind): string {
  return kind === 'follower-move' && !patched(FOLLOWER_MOVE_V3) ? 'followerMoveV2' : WORKFLOW_TYPE[kind];
}

/**
 * Start the step as a reconfiguration of its partition (`reconfigure-<partition>`) that outlives the starter
 * and is never cancelled with it. Another reconfiguration already running on the partition is not an error:
 * the step is skipped and planned again from the next snapshot.
 */
export async function startMove(step: Proposal, origin: MoveOrigin, now: number): Promise<Started> {
  const { kind, request: requestFor } = RUNS_AS[step.op];
  const request = requestFor(step, origin);
  const workflowId = reconfigurationWorkflowId(step.partition);
  try {
    const handle = await startChild(typeOf(kind), {
      workflowId,
      args: [request],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      cancellationType: ChildWorkflowCancellationType.ABANDON,
      typedSearchAttributes: [
        { key: PartitionKey, value: step.partition },
        { key: KindKey, value: kind },
        { key: PhaseKey, value: 'validating' },
        { key: PhaseSinceKey, value: new Date() },
        { key: SourceKey, value: step.from },
        { key: TargetKey, value: step.to },
      ],
      staticSummary: `${kind} of ${step.partition}: ${step.from} → ${step.to} (${origin})`,
      staticDetails: step.reason,
    });
    return {
      handle,
      move: { partition: step.partition, op: step.op, from: step.from, to: step.to, workflowId, runId: handle.firstExecutionRunId, startedAt: now, bytes: step.bytes, reason: step.reason },
    };
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return { skipped: `another reconfiguration of ${step.partition} is running (${workflowId})` };
    throw err;
  }
}

/**
 * Executions that have it start a tick's steps together: the start commands of up to STARTS_PER_TASK steps go to the
 * server in one workflow task. Before it each start waited for the server's answer before the next was sent: a
 * workflow task per start in the loop's history, and a tick of n starts n round trips long. (With 1,000 transfers
 * allowed at 1,000 nodes the server's own throughput bounds the ramp either way: docs/scale.md.)
 */
export const START_TOGETHER = 'start-moves-together';

/** Starts sent in one workflow task: each carries its request, search attributes and summary (about 1.5 KB). */
const STARTS_PER_TASK = 100;

/**
 * Start the steps in order, each unless `hold` names why not (asked just before it is sent), and hand each step's
 * result to `started` as it comes: together in batches of STARTS_PER_TASK (patch START_TOGETHER), or one at a time.
 */
export async function startMoves(
  steps: readonly Proposal[],
  origin: MoveOrigin,
  now: number,
  hold: (step: Proposal) => string | null,
  started: (step: Proposal, result: Started) => void,
): Promise<void> {
  if (steps.length === 0) return;
  if (!patched(START_TOGETHER)) {
    for (const step of steps) {
      const held = hold(step);
      started(step, held === null ? await startMove(step, origin, now) : { skipped: held });
    }
    return;
  }
  const one = (step: Proposal): Promise<Started> | Started => {
    const held = hold(step);
    return held === null ? startMove(step, origin, now) : { skipped: held };
  };
  for (let i = 0; i < steps.length; i += STARTS_PER_TASK) {
    const batch = steps.slice(i, i + STARTS_PER_TASK);
    const results = await Promise.all(batch.map(one));
    batch.forEach((step, k) => started(step, results[k]!));
  }
}
