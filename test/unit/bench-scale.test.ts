/**
 * The scale bench's reading of the worker's log (bench/scale.ts ticksOf): a tick is a snapshot and the plan after
 * it, counted warm only when the topology was read by its changes (a page of the check beside it does not count),
 * and only from the time asked; a snapshot that went on without a visibility list says so.
 */
import { describe, expect, it } from 'vitest';
import { ticksOf, wholeReads } from '../../bench/scale';

const line = (time: number, msg: string, component: string, extra: Record<string, unknown> = {}) => ({ time, msg, component, ...extra });

describe('the scale bench', () => {
  it('pairs each snapshot with its plan and says how the topology was read for it', () => {
    const lines = [
      line(1, 'topology read', 'topology', { read: 'whole', ms: 2000 }),
      line(2, 'snapshot', 'rebalancer', { ms: 2100 }),
      line(3, 'planned', 'rebalancer', { ms: 40 }),
      line(10, 'topology read', 'topology', { read: 'changes', ms: 20 }),
      line(11, 'topology read', 'topology', { read: 'whole', ms: 1800, checked: true }),
      line(11, 'topology read', 'topology', { read: 'page', ms: 150, records: 2000, drifted: 0 }),
      line(11, 'snapshot', 'rebalancer', { ms: 60, topologyMs: 20, endsMs: 55, tracked: 3, wentOn: true }),
      line(12, 'move started', 'rebalancer'),
      line(13, 'planned', 'rebalancer', { ms: 35 }),
      // A plan with no snapshot before it (a drain's) is no tick of the loop.
      line(14, 'planned', 'rebalancer', { ms: 30 }),
      line(20, 'snapshot', 'rebalancer', { ms: 50 }),
      line(21, 'planned', 'rebalancer', { ms: 30 }),
    ];
    expect(ticksOf(lines, 0)).toEqual([
      { ms: 2140, snapshotMs: 2100, planMs: 40, read: 'whole', at: 2, parts: {}, wentOn: false },
      { ms: 95, snapshotMs: 60, planMs: 35, read: 'changes', at: 11, parts: { topologyMs: 20, endsMs: 55 }, wentOn: true },
      { ms: 80, snapshotMs: 50, planMs: 30, read: 'none', at: 20, parts: {}, wentOn: false },
    ]);
    expect(ticksOf(lines, 5).map((t) => t.at)).toEqual([11, 20]);
    // The fallback: the model's whole reads, not the check beside the reads.
    expect(wholeReads(lines)).toEqual([2000]);
  });
});
