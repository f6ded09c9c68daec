/**
 * Every worker starts the broker's progress relay workflow, or joins the one already running: its id comes
 * from the broker URL and the task queue, so however many workers run on a task queue, one relay reads the
 * feed and each event is signalled once. The task queue is part of it because the relay runs only where it
 * was started: workers moved to another queue must not join a relay nobody runs any more.
 */
import { createHash } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { WorkflowIdConflictPolicy } from '@temporalio/common';
import type { RelayInput, RelayTuning } from '../rules/relay';

/** The hash of broker URL and task queue that names the relay and the rebalancer it signals (`rebalancerWorkflowId`). */
export function relayScope(brokerUrl: string, taskQueue: string): string {
  return createHash('sha256').update(`${brokerUrl}\n${taskQueue}`).digest('hex').slice(0, 12);
}

export function relayWorkflowId(brokerUrl: string, taskQueue: string): string {
  return `progress-relay-${relayScope(brokerUrl, taskQueue)}`;
}

/** Starts the relay from the feed's beginning unless it runs already; the running one keeps its cursor and tuning. */
export async function ensureRelay(client: Client, taskQueue: string, brokerUrl: string, tuning?: Partial<RelayTuning>): Promise<string> {
  const workflowId = relayWorkflowId(brokerUrl, taskQueue);
  await client.workflow.start<(input: RelayInput) => Promise<never>>('progressRelay', {
    workflowId,
    taskQueue,
    args: [{ brokerUrl, cursor: 0, tuning }],
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    staticSummary: `Progress relay for ${brokerUrl}`,
  });
  return workflowId;
}
