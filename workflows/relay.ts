/**
 * The progress relay as a workflow: one per broker, whatever the number of workers. Its activity reads the
 * broker's event feed and signals moves; the cursor lives in the activity's heartbeat details and in this
 * workflow's input, never on a worker's disk, so a killed worker's successor resumes where delivery stopped.
 */
import { continueAsNew, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { RelayActivities } from '../activities/relay';

export interface RelayTuning {
  /** A run whose worker stops heartbeating for this long is retried on another worker. */
  heartbeatTimeoutMs: number;
  /** How long one activity run reads the feed before it hands its cursor back to the workflow. */
  runMs: number;
  /** Long-poll wait per read of the feed. */
  pollWaitMs: number;
  /** Least time between two progress signals to one partition, unless the boundary is crossed. */
  progressIntervalMs: number;
  /** Pause after a page with events, so the next page gathers a batch to coalesce. */
  batchMs: number;
  /** Runs per history before continuing as new: each adds about six events. */
  runsPerHistory: number;
}

export const RELAY_TUNING: RelayTuning = {
  heartbeatTimeoutMs: 20_000,
  runMs: 3 * 60_000,
  pollWaitMs: 5_000,
  progressIntervalMs: 5_000,
  batchMs: 250,
  runsPerHistory: 100,
};

export interface RelayInput {
  /** The broker whose feed is relayed; a worker configured for another broker refuses the run. */
  brokerUrl: string;
  /** Feed position: every event after it is still to be delivered. */
  cursor: number;
  tuning?: Partial<RelayTuning>;
}

export interface RelayRun extends Omit<RelayTuning, 'runsPerHistory'> {
  brokerUrl: string;
  cursor: number;
}

export async function progressRelay(input: RelayInput): Promise<never> {
  const tuning: RelayTuning = { ...RELAY_TUNING, ...input.tuning };
  const { relayFeed } = proxyActivities<RelayActivities>({
    // A run stops reading after runMs; the rest is room to deliver its last page.
    startToCloseTimeout: tuning.runMs + 2 * 60_000,
    heartbeatTimeout: tuning.heartbeatTimeoutMs,
    // No attempt limit: the relay must outlive any broker or worker outage.
    retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s' },
  });
  let cursor = input.cursor;
  const { runsPerHistory, ...run } = tuning;
  for (let i = 0; i < runsPerHistory && !workflowInfo().continueAsNewSuggested; i++) {
    cursor = await relayFeed({ ...run, brokerUrl: input.brokerUrl, cursor });
  }
  return continueAsNew<typeof progressRelay>({ ...input, cursor });
}
