/**
 * A workflow interceptor for query-replay.test.ts: a query whose first argument is a number takes about that
 * many milliseconds of work to answer, as on a busy worker. A read (a local activity) started in the same workflow
 * task then finishes while the query is answered: the task is completed with the read's marker and the result
 * handed over with the next task, the schedule sdk-core otherwise takes only when a query happens to be answered
 * in that window. Other queries are answered at once.
 */
import type { Next, QueryInput, WorkflowInboundCallsInterceptor, WorkflowInterceptorsFactory } from '@temporalio/workflow';

/** Loop turns per millisecond, about (the workflow clock stands still while a query is answered: work, not waiting). */
const TURNS_PER_MS = 1_000_000;

class SlowQueries implements WorkflowInboundCallsInterceptor {
  handleQuery(input: QueryInput, next: Next<WorkflowInboundCallsInterceptor, 'handleQuery'>): Promise<unknown> {
    const ms = input.args[0];
    let turns = 0;
    if (typeof ms === 'number') for (let i = 0; i < ms * TURNS_PER_MS; i++) turns += i & 1;
    // The count goes into the call (it is never negative) so the loop is not optimised away.
    return next({ ...input, args: turns < 0 ? [turns] : input.args.slice(1) });
  }
}

export const interceptors: WorkflowInterceptorsFactory = () => ({ inbound: [new SlowQueries()] });
