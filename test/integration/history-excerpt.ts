/**
 * What a nondeterminism error points at, in words: the events of the history around the one sdk-core names. A
 * replay failure in CI leaves nothing else behind (the dev server and its histories go with the run), and which
 * signal, timer or activity result shared a workflow task with the event is what tells the cause.
 */
import { temporal } from '@temporalio/proto';

type Event = temporal.api.history.v1.IHistoryEvent;

const EVENTS_BEFORE = 30;
const EVENTS_AFTER = 4;

const ms = (d: { seconds?: unknown; nanos?: number | null } | null | undefined): string =>
  d ? `${Number(d.seconds ?? 0) * 1000 + Math.round((d.nanos ?? 0) / 1e6)} ms` : '';

const text = (p: temporal.api.common.v1.IPayload | null | undefined, max = 140): string => {
  const s = p?.data ? Buffer.from(p.data).toString('utf8') : '';
  return s.length > max ? `${s.slice(0, max)}…` : s;
};

function detail(e: Event): string {
  if (e.timerStartedEventAttributes) return `timer ${e.timerStartedEventAttributes.timerId} for ${ms(e.timerStartedEventAttributes.startToFireTimeout)}`;
  if (e.timerFiredEventAttributes) return `timer ${e.timerFiredEventAttributes.timerId}`;
  if (e.timerCanceledEventAttributes) return `timer ${e.timerCanceledEventAttributes.timerId}`;
  if (e.activityTaskScheduledEventAttributes) return `${e.activityTaskScheduledEventAttributes.activityType?.name ?? '?'} #${e.activityTaskScheduledEventAttributes.activityId}`;
  if (e.activityTaskCompletedEventAttributes) return `of event ${String(e.activityTaskCompletedEventAttributes.scheduledEventId)}: ${text(e.activityTaskCompletedEventAttributes.result?.payloads?.[0])}`;
  if (e.workflowExecutionSignaledEventAttributes) {
    const s = e.workflowExecutionSignaledEventAttributes;
    return `${s.signalName ?? '?'} ${text(s.input?.payloads?.[0])}`;
  }
  if (e.upsertWorkflowSearchAttributesEventAttributes) {
    const fields = e.upsertWorkflowSearchAttributesEventAttributes.searchAttributes?.indexedFields ?? {};
    return Object.entries(fields).map(([k, v]) => `${k}=${text(v)}`).join(' ');
  }
  if (e.markerRecordedEventAttributes) return e.markerRecordedEventAttributes.markerName ?? '';
  if (e.workflowTaskFailedEventAttributes) return `cause ${String(e.workflowTaskFailedEventAttributes.cause)}: ${e.workflowTaskFailedEventAttributes.failure?.message ?? ''}`;
  if (e.workflowTaskCompletedEventAttributes?.sdkMetadata) return `sdk flags ${JSON.stringify(e.workflowTaskCompletedEventAttributes.sdkMetadata)}`;
  return '';
}

/** One line per event: id, time, type and what tells it apart. */
export function describeEvents(events: readonly Event[], from: number, to: number): string {
  const t0 = events[0]?.eventTime;
  const start = t0 ? Number(t0.seconds ?? 0) * 1000 + (t0.nanos ?? 0) / 1e6 : 0;
  return events
    .filter((e) => Number(e.eventId) >= from && Number(e.eventId) <= to)
    .map((e) => {
      const at = e.eventTime ? Number(e.eventTime.seconds ?? 0) * 1000 + (e.eventTime.nanos ?? 0) / 1e6 - start : 0;
      const type = temporal.api.enums.v1.EventType[e.eventType ?? 0]?.replace(/^EVENT_TYPE_/, '') ?? String(e.eventType);
      return `  ${String(e.eventId).padStart(4)} +${(at / 1000).toFixed(3)}s ${type} ${detail(e)}`.trimEnd();
    })
    .join('\n');
}

/** The error's message with the events before and just after the one it names (the whole history if it names none). */
export function withHistoryExcerpt(err: unknown, history: temporal.api.history.v1.IHistory): Error {
  const message = err instanceof Error ? err.message : String(err);
  const events = history.events ?? [];
  const named = /HistoryEvent\(id: (\d+)/.exec(message);
  const at = named ? Number(named[1]) : events.length;
  const excerpt = describeEvents(events, at - EVENTS_BEFORE, at + EVENTS_AFTER);
  const out = new Error(`${message}\nthe history around event ${at} (${events.length} events):\n${excerpt}`);
  out.name = err instanceof Error ? err.name : 'Error';
  if (err instanceof Error) out.stack = `${out.name}: ${out.message}\n${(err.stack ?? '').split('\n').slice(1).join('\n')}`;
  return out;
}
