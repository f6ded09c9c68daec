/**
 * Runs conformance cases and reports one outcome per case. A case also fails when the implementation's
 * invariant checker recorded a breach while it ran: no case drives faults beyond the budget.
 */
import { randomBytes } from 'node:crypto';
import { ClusterClient } from '../client';
import { CONFORMANCE_CASES, type ConformanceCase } from './cases';
import { Harness, Skip } from './harness';

export type Outcome = { name: string; status: 'pass' } | { name: string; status: 'fail' | 'skip'; reason: string };

export function newRunId(): string {
  return randomBytes(4).toString('hex');
}

export async function runCase(
  c: ConformanceCase,
  client: ClusterClient,
  options: { runId?: string } = {},
): Promise<Outcome> {
  try {
    const breachesBefore = (await client.invariants()).breaches.length;
    await c.run(new Harness(client, options.runId ?? newRunId()));
    const breaches = (await client.invariants()).breaches;
    if (breaches.length > breachesBefore) {
      const first = breaches[breachesBefore];
      return {
        name: c.name,
        status: 'fail',
        reason: `invariant breach during the case: ${JSON.stringify(first).slice(0, 400)}`,
      };
    }
    return { name: c.name, status: 'pass' };
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    return { name: c.name, status: err instanceof Skip ? 'skip' : 'fail', reason };
  }
}

export function formatOutcome(o: Outcome): string {
  return o.status === 'pass' ? `PASS ${o.name}` : `${o.status === 'fail' ? 'FAIL' : 'SKIP'} ${o.name}: ${o.reason}`;
}

/** Every case in order against one cluster; `report` sees each outcome as it lands. */
export async function runSuite(
  client: ClusterClient,
  options: { report?: (o: Outcome) => void; filter?: (name: string) => boolean } = {},
): Promise<Outcome[]> {
  const runId = newRunId();
  const outcomes: Outcome[] = [];
  const report = options.report ?? (() => undefined);
  for (const c of CONFORMANCE_CASES.filter((x) => options.filter?.(x.name) ?? true)) {
    const o = await runCase(c, client, { runId });
    outcomes.push(o);
    report(o);
  }
  return outcomes;
}

export function summary(outcomes: Outcome[]): string {
  const passed = outcomes.filter((o) => o.status === 'pass').length;
  const failed = outcomes.filter((o) => o.status === 'fail').length;
  return `conformance: ${passed} passed, ${failed} failed`;
}
