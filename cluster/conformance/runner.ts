/**
 * Runs conformance cases and reports one outcome per case. Before a run it reads which test controls the
 * broker offers and refuses a broker that holds partitions the suite did not create (unless allowed); a case
 * that needs a control the broker lacks is skipped with the reason; every case is followed by its cleanup,
 * and fails when the cleanup fails or (where the broker reports them) an invariant breach was recorded.
 */
import { randomBytes } from 'node:crypto';
import { ClusterClient } from '../client';
import { CONFORMANCE_CASES, type ConformanceCase } from './cases';
import { CheckFailed, Skip } from './checks';
import { Harness, SUITE_PREFIX, offers, type SuiteContext } from './harness';

export type Outcome = { name: string; status: 'pass' } | { name: string; status: 'fail' | 'skip'; reason: string };

export interface SuiteOptions {
  /** Run beside partitions the suite did not create (it still touches only its own). */
  allowShared?: boolean;
  /** Run only the cases that need nothing but the contract's reads: safe against a production broker. */
  readOnly?: boolean;
  runId?: string;
}

/** The broker holds partitions the suite did not create and neither --allow-shared nor --read-only was given. */
export class SharedBrokerError extends Error {
  override name = 'SharedBrokerError';
}

export function newRunId(): string {
  return randomBytes(4).toString('hex');
}

/** Reads the broker's controls and checks that the suite may run against it. */
export async function prepare(client: ClusterClient, options: SuiteOptions = {}): Promise<SuiteContext> {
  const readOnly = options.readOnly ?? false;
  const [controls, topo] = await Promise.all([client.controls(), client.topology()]);
  const foreign = topo.partitions.filter((p) => !p.id.startsWith(SUITE_PREFIX)).map((p) => p.id);
  if (foreign.length > 0 && !readOnly && !options.allowShared) {
    const sample = foreign.slice(0, 5).join(', ') + (foreign.length > 5 ? ', ...' : '');
    throw new SharedBrokerError(
      `${client.baseUrl} holds ${foreign.length} partition(s) the conformance suite did not create (${sample}). ` +
        'The suite works only on partitions and nodes it creates, but it fills sync budgets and injects faults on its ' +
        'own nodes; pass --allow-shared to run beside them anyway, or --read-only to run only the read cases.',
    );
  }
  return { client, runId: options.runId ?? newRunId(), controls, readOnly, created: { nodes: 0, partitions: 0 } };
}

/** Why the case cannot run on this broker, or null when it can. */
function unmet(c: ConformanceCase, suite: SuiteContext): string | null {
  if (suite.readOnly && !c.readOnly) return 'read-only run: the case sends guarded writes';
  const missing = c.needs.filter((n) => !offers(suite, n));
  if (missing.length > 0) return `needs the test control(s) ${missing.join(', ')}, which this broker does not offer`;
  return null;
}

export async function runCase(c: ConformanceCase, suite: SuiteContext): Promise<Outcome> {
  const why = unmet(c, suite);
  if (why !== null) return { name: c.name, status: 'skip', reason: why };
  const breaches = async () => (offers(suite, 'invariants') ? (await suite.client.invariants()).breaches : []);
  const h = new Harness(suite);
  let failure: unknown = null;
  let before = 0;
  try {
    before = (await breaches()).length;
    await c.run(h);
  } catch (err) {
    failure = err;
  }
  try {
    await h.cleanup();
    const after = await breaches();
    if (after.length > before) failure = also(failure, `invariant breach during the case: ${JSON.stringify(after[before]).slice(0, 400)}`);
  } catch (err) {
    // A case that could not clean up after itself fails, whatever it found before.
    failure = also(failure, `cleanup failed: ${messageOf(err)}`);
  }
  if (failure === null) return { name: c.name, status: 'pass' };
  return { name: c.name, status: failure instanceof Skip ? 'skip' : 'fail', reason: messageOf(failure) };
}

/** A failure that adds `problem` to what the case already found. */
function also(failure: unknown, problem: string): CheckFailed {
  return new CheckFailed(failure === null ? problem : `${messageOf(failure)}; then ${problem}`);
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function formatOutcome(o: Outcome): string {
  return o.status === 'pass' ? `PASS ${o.name}` : `${o.status === 'fail' ? 'FAIL' : 'SKIP'} ${o.name}: ${o.reason}`;
}

/** Every case in order against one broker; `report` sees each outcome as it lands. */
export async function runSuite(
  client: ClusterClient,
  options: SuiteOptions & { report?: (o: Outcome) => void; filter?: (name: string) => boolean } = {},
): Promise<Outcome[]> {
  const suite = await prepare(client, options);
  const outcomes: Outcome[] = [];
  for (const c of CONFORMANCE_CASES.filter((x) => options.filter?.(x.name) ?? true)) {
    const o = await runCase(c, suite);
    outcomes.push(o);
    options.report?.(o);
  }
  return outcomes;
}

export function summary(outcomes: Outcome[]): string {
  const count = (s: Outcome['status']) => outcomes.filter((o) => o.status === s).length;
  return `conformance: ${count('pass')} passed, ${count('skip')} skipped, ${count('fail')} failed`;
}
