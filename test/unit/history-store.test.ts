/**
 * The admin service's history store on a real SQLite file: samples read back in order, pruned to one hour by the
 * store's clock, kept across a close and reopen; ended runs recorded once; a move's total the most it had left.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClusterEvent, Topology } from '../../cluster/contract';
import { bytesCopied, HISTORY_MS, HistoryStore, notePeaks, worstByDimension, type ClusterSample, type NodeSample } from '../../admin/history';
import type { EndedRun } from '../../admin/deps';
import type { NodeScore } from '../../planner/types';
import type { MoveStatus } from '../../rules/definitions';

const NONE = new Map<string, number>();
const T0 = Date.parse('2026-01-01T00:00:00Z');
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function tempFile(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'history-'));
  dirs.push(dir);
  return path.join(dir, 'audit.db');
}

function sample(at: number, spread: number): ClusterSample {
  const worst = { owned: { node: 'n1', deviation: spread }, followed: null, history: null, traffic: null, sync: null };
  return { at, spread, mean: 1, threshold: 0.1, worst, bytesPerSec: 1024 * spread, running: 1, recoveryPending: 0 };
}

function nodeAt(node: string, total: number): NodeSample {
  return { node, total, owned: total, followed: 0, history: 0, traffic: 0, sync: 0 };
}

function ended(runId: string, closedAt: number, from: string, to: string): EndedRun {
  return { runId, workflowId: `reconfigure-q-${runId}`, partition: `q-${runId}`, kind: 'follower-move', from, to, closedAt, outcome: 'completed' };
}

describe('HistoryStore', () => {
  it('reads back each sample and node score in time order, with the band of the sample', () => {
    let now = T0;
    const store = new HistoryStore(null, () => now);
    for (let i = 0; i < 3; i++) {
      now = T0 + i * 5_000;
      store.record(sample(now, i / 10), [nodeAt('n1', 1 + i / 10), nodeAt('n2', 1 - i / 10)]);
    }
    expect(store.samples(T0).map((s) => [s.at, s.spread])).toEqual([[T0, 0], [T0 + 5_000, 0.1], [T0 + 10_000, 0.2]]);
    expect(store.samples(T0 + 5_000)).toHaveLength(2);
    expect(store.samples(T0)[1]).toEqual(sample(T0 + 5_000, 0.1));
    expect(store.nodePoints('n2', T0).map((p) => [p.at, p.total, p.mean, p.threshold])).toEqual([
      [T0, 1, 1, 0.1],
      [T0 + 5_000, 0.9, 1, 0.1],
      [T0 + 10_000, 0.8, 1, 0.1],
    ]);
    store.close();
  });

  it('keeps one hour: samples, node scores and ended moves older than that go at the next sample', () => {
    let now = T0;
    const store = new HistoryStore(null, () => now);
    store.record(sample(T0, 0.5), [nodeAt('n1', 1.5)]);
    store.recordEnded([ended('1', T0, 'n1', 'n2')]);
    now = T0 + HISTORY_MS;
    store.record(sample(now, 0.4), [nodeAt('n1', 1.4)]);
    // Exactly an hour old still counts.
    expect(store.samples(0)).toHaveLength(2);
    now = T0 + HISTORY_MS + 1;
    store.record(sample(now, 0.3), [nodeAt('n1', 1.3)]);
    expect(store.samples(0).map((s) => s.at)).toEqual([T0 + HISTORY_MS, T0 + HISTORY_MS + 1]);
    expect(store.nodePoints('n1', 0).map((p) => p.total)).toEqual([1.4, 1.3]);
    expect(store.ended(0)).toEqual([]);
    store.close();
  });

  it('survives a close and reopen on the same file', () => {
    const file = tempFile();
    let now = T0;
    const first = new HistoryStore(file, () => now);
    first.record(sample(T0, 0.2), [nodeAt('n1', 1.2)]);
    first.recordEnded([ended('7', T0, 'n1', 'n3')]);
    first.progress([move(30_000)], NONE);
    first.setFeedCursor(4_242);
    first.close();

    now = T0 + 5_000;
    const again = new HistoryStore(file, () => now);
    again.record(sample(now, 0.1), [nodeAt('n1', 1.1)]);
    expect(again.samples(0).map((s) => s.spread)).toEqual([0.2, 0.1]);
    expect(again.nodePoints('n1', 0).map((p) => p.total)).toEqual([1.2, 1.1]);
    expect(again.knowsRun('7')).toBe(true);
    expect(again.feedCursor()).toBe(4_242);
    // The move's total seen before the restart still counts after it.
    expect(again.progress([move(20_000)], NONE)[0]).toMatchObject({ bytesTotal: 30_000, bytesCopied: 10_000 });
    again.close();
  });

  it('records an ended run once and lists a node\'s moves in and out', () => {
    const store = new HistoryStore(null, () => T0);
    store.recordEnded([ended('1', T0, 'n1', 'n2'), ended('2', T0 + 1, 'n3', 'n1')]);
    store.recordEnded([{ ...ended('1', T0, 'n1', 'n2'), outcome: 'aborted' }, ended('3', T0 + 2, 'n2', 'n3')]);
    expect(store.ended(0).map((r) => [r.runId, r.outcome])).toEqual([['1', 'completed'], ['2', 'completed'], ['3', 'completed']]);
    expect(store.ended(0, 'n1').map((r) => r.runId)).toEqual(['1', '2']);
    store.close();
  });
});

function move(bytesRemaining: number | null, over: Partial<MoveStatus> = {}): MoveStatus {
  return {
    kind: 'follower-move', partition: 'q-1', from: 'n1', to: 'n6', origin: 'planner', phase: 'catching_up', bytesRemaining, boundary: null,
    targetDurable: null, blockingReason: null, epoch: 1, generation: 1, retries: 0, outcome: null, ...over,
  } as MoveStatus;
}

describe('a move\'s progress', () => {
  it('counts copied bytes from the most the move, or the broker\'s transfer to its target, had left', () => {
    const store = new HistoryStore(null);
    const peaks = new Map<string, number>();
    const progress = (node: string, bytesRemaining: number, partition = 'q-1'): ClusterEvent =>
      ({ type: 'progress', seq: 1, at: 1, partition, generation: 1, confirmedTail: 1, boundary: null, replicas: [{ node, durableOffset: 0, bytesRemaining, stalled: false, pausedForRecovery: false }] });
    // The broker is ahead of the workflow: its transfer had 30 MB left before the workflow first reported.
    notePeaks(peaks, [progress('n6', 30_000_000), progress('n6', 29_000_000), progress('n2', 5, 'q-2')]);
    expect(store.progress([move(null)], peaks)[0]).toMatchObject({ bytesTotal: null, bytesCopied: null });
    notePeaks(peaks, [progress('n6', 27_000_000)]);
    expect(store.progress([move(28_000_000)], peaks)[0]).toMatchObject({ bytesTotal: 30_000_000, bytesCopied: 2_000_000 });
    // Read without the broker (the API's own reads) the total stays.
    expect(store.progress([move(19_600_000)], NONE)[0]).toMatchObject({ bytesTotal: 30_000_000, bytesCopied: 10_400_000 });
    // A page of other moves forgets nothing: the API reads only the moves a page shows.
    store.progress([move(1_000, { partition: 'q-2', to: 'n2' })], NONE);
    expect(store.progress([move(19_000_000)], NONE)[0]).toMatchObject({ bytesTotal: 30_000_000, bytesCopied: 11_000_000 });
    // Once the move is no longer in progress as a sample lists them, its total is forgotten: the next move of the
    // partition starts anew.
    store.keepOnly([], NONE);
    expect(store.progress([move(5_000)], NONE)[0]).toMatchObject({ bytesTotal: 5_000, bytesCopied: 0 });
    // A transfer the broker reports caught up ends: the next one to that node counts from its own start.
    notePeaks(peaks, [progress('n6', 0), progress('n6', 8_000)]);
    expect(peaks.get('q-1 n6')).toBe(8_000);
    expect(peaks.get('q-2 n2')).toBe(5);
    store.close();
  });
});

describe('sample figures', () => {
  const score = (node: string, owned: number, traffic: number, over: Partial<NodeScore> = {}): NodeScore =>
    ({ node, zone: 'z1', capacity: 1, live: true, draining: false, owned, followed: 0, history: 0, traffic, sync: 0, total: owned + traffic, bands: null, ...over });

  it('names, per dimension, the live node furthest from that dimension\'s mean', () => {
    const worst = worstByDimension([score('n1', 0.3, 0.1), score('n2', 0.3, 0.4), score('n3', 0, 0.4), score('n4', 2, 2, { live: false })]);
    expect(worst.owned).toEqual({ node: 'n3', deviation: expect.closeTo(-0.2) as number });
    expect(worst.traffic).toEqual({ node: 'n1', deviation: expect.closeTo(-0.2) as number });
    expect(worst.followed).toEqual({ node: 'n1', deviation: 0 });
  });

  it('counts bytes copied: what transfers have less left, all of one whose node holds the copy, a new one from its start', () => {
    const topology = {
      partitions: [
        { id: 'q-1', owner: 'n1', followers: ['n2', 'n6'], learners: [] },
        { id: 'q-2', owner: 'n1', followers: ['n2', 'n3'], learners: [] },
        { id: 'q-4', owner: 'n1', followers: ['n2', 'n3'], learners: ['n6'] },
      ],
    } as unknown as Topology;
    const before = new Map([['q-1 n6', 1_000], ['q-2 n6', 5_000], ['q-3 n6', 9_000], ['q-4 n6', 300]]);
    const transfer = (partition: string, bytesRemaining: number) => ({ partition, node: 'n6', kind: 'rebalance' as const, bytesRemaining, pausedForRecovery: false });
    const peaks = new Map([['q-5 n6', 50_000]]);
    // q-3 copied 5,000; q-1 caught up (n6 follows it now): its last 1,000; q-4 caught up, n6 a learner until the
    // swap: its last 300; q-2's transfer ended without n6 holding it: nothing; q-5 began since: 50,000 - 42,000.
    expect(bytesCopied(before, [transfer('q-3', 4_000), transfer('q-5', 42_000)], topology, peaks)).toBe(5_000 + 1_000 + 300 + 8_000);
  });
});
