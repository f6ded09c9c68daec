/**
 * The progress relay as a workflow: one per broker, whatever the number of workers. Its activity reads the
 * broker's event feed and signals moves; the cursor lives in the activity's heartbeat details and in this
 * workflow's input, never on a worker's disk, so a killed worker's successor resumes where delivery stopped.
 */
import { continueAsNew, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { RelayActivities } from '../activities/relay';
import { RELAY_TUNING, type RelayInput, type RelayTuning } from '../rules/relay';

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
