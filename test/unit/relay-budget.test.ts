/**
 * The relay's budget of progress signals (activities/relay.ts), driven through its activity with a stand-in feed and
 * client (no Temporal server): with many partitions reporting progress, the signals after each partition's first stay
 * within PROGRESS_SIGNALS_PER_SECOND and use it, and a replica crossing the switch boundary is signalled at once all the same.
 */
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { createRelayActivities, PROGRESS_SIGNALS_PER_SECOND, progressInterval } from '../../activities/relay';
import type { ClusterEvent, EventsPage } from '../../cluster/contract';
import { reconfigurationWorkflowId } from '../../rules/definitions';

type Progress = Extract<ClusterEvent, { type: 'progress' }>;

/** Enough that the budget, not the run's 100 ms interval, spaces each partition's signals (1.6 s apart). */
const PARTITIONS = 80;
const RUN_MS = 4_000;
/** The partition whose learner crosses the boundary halfway through the run. */
const CROSSING = 'q-7';

describe('the relay budget of progress signals', () => {
  it('is the run interval while few partitions report, longer once that many would pass the budget', () => {
    expect(progressInterval({ progressIntervalMs: 5_000 }, 200)).toBe(5_000);
    expect(progressInterval({ progressIntervalMs: 5_000 }, 1_000)).toBe((1_000 * 1_000) / PROGRESS_SIGNALS_PER_SECOND);
  });

  it('holds progress to the budget over many partitions, and signals a boundary crossing at once', async () => {
    let seq = 0;
    const started = Date.now();
    let crossedAt: number | null = null;
    // Every read: a progress event for each partition, its learner a little further on.
    const events = async (after: number): Promise<EventsPage> => {
      await new Promise((r) => setTimeout(r, 50));
      const now = Date.now();
      if (crossedAt === null && now - started > RUN_MS / 2) crossedAt = now;
      const page: Progress[] = Array.from({ length: PARTITIONS }, (_, i) => {
        const crossed = crossedAt !== null && `q-${i}` === CROSSING;
        return {
          type: 'progress',
          seq: ++seq,
          at: now,
          partition: `q-${i}`,
          generation: 2,
          confirmedTail: 1_000,
          boundary: 900,
          replicas: [
            { node: 'n1', durableOffset: 1_000, bytesRemaining: 0, stalled: false, pausedForRecovery: false },
            { node: 'n9', durableOffset: crossed ? 950 : Math.min(800, seq), bytesRemaining: 1_000, stalled: false, pausedForRecovery: false },
          ],
        };
      });
      return { events: page, cursor: after + page.length };
    };
    const signals: { workflowId: string; at: number }[] = [];
    const client = {
      workflow: { getHandle: (workflowId: string) => ({ signal: async () => void signals.push({ workflowId, at: Date.now() }) }) },
    } as unknown as Pick<Client, 'workflow'>;
    const { relayFeed } = createRelayActivities({ cluster: { events, baseUrl: 'http://broker' }, client });
    await new MockActivityEnvironment().run(relayFeed, {
      brokerUrl: 'http://broker',
      cursor: 0,
      heartbeatTimeoutMs: 5_000,
      runMs: RUN_MS,
      pollWaitMs: 100,
      progressIntervalMs: 100,
      batchMs: 0,
    });
    const elapsed = (Date.now() - started) / 1000;
    // Each partition's first progress goes out at once, and each again at the run's end (its flush); between them the budget.
    const between = signals.length - 2 * PARTITIONS;
    // Without the budget, a signal per partition every 100 ms: 3,200 in the run.
    expect(between).toBeLessThanOrEqual(PROGRESS_SIGNALS_PER_SECOND * elapsed * 1.2);
    // And the budget is spent: each partition hears again every 1.6 s.
    expect(between).toBeGreaterThanOrEqual(PROGRESS_SIGNALS_PER_SECOND * elapsed * 0.5);
    const crossing = signals.filter((s) => s.workflowId === reconfigurationWorkflowId(CROSSING) && crossedAt !== null && s.at >= crossedAt);
    expect(crossedAt).not.toBeNull();
    expect(crossing[0]!.at - crossedAt!).toBeLessThan(1_000);
  });
});
