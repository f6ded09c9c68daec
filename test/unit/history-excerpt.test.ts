import fs from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { withHistoryExcerpt } from '../integration/history-excerpt';

const fixture = path.resolve(import.meta.dirname, '../fixtures/histories/queried-v2-catch-up-deadline.json');
const history = temporal.api.history.v1.History.fromObject(JSON.parse(fs.readFileSync(fixture, 'utf8')) as object);

describe('a replay failure says what the history held around the event it names', () => {
  it('lists the events before and just after it, with the timers, signals and phases that tell the cause', () => {
    const err = withHistoryExcerpt(new Error('Nondeterminism error: UpsertWorkflowSearchAttributesMachine does not handle HistoryEvent(id: 36, TimerStarted)'), history);
    const lines = err.message.split('\n');
    expect(lines[0]).toContain('HistoryEvent(id: 36');
    expect(lines[1]).toBe(`the history around event 36 (${history.events!.length} events):`);
    const ids = lines.slice(2).map((l) => Number(l.trim().split(' ')[0]));
    expect(ids).toEqual(Array.from({ length: 40 - 6 + 1 }, (_, i) => 6 + i));
    expect(err.message).toMatch(/ 36 \+\d+\.\d{3}s TIMER_STARTED timer 4 for 1 ms/);
    expect(err.message).toMatch(/ 32 \+\d+\.\d{3}s TIMER_FIRED timer 2/);
    expect(err.message).toMatch(/ 22 \+\d+\.\d{3}s UPSERT_WORKFLOW_SEARCH_ATTRIBUTES .*RebalancePhase="catching_up"/);
    expect(err.message).toMatch(/ 24 \+\d+\.\d{3}s WORKFLOW_EXECUTION_SIGNALED progress \{"at":2231/);
  });
});
