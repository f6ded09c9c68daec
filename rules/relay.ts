/**
 * The progress relay's input and tuning: shared by its workflow, its activity (which runs a share of the tuning)
 * and its starter, each on its own side of the sandbox.
 */
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
