/**
 * The conformance suite against the reference cluster: every case as its own test on a fresh cluster, then
 * the whole suite in order against one cluster, the way `npm run conformance -- --url` runs it.
 */
import { describe, expect, it } from 'vitest';
import { ClusterClient } from '../../cluster/client';
import { CONFORMANCE_CASES } from '../../cluster/conformance/cases';
import { startEmbedded } from '../../cluster/conformance/embedded';
import { formatOutcome, runCase, runSuite } from '../../cluster/conformance/runner';

describe('conformance: a fresh reference cluster per case', () => {
  for (const c of CONFORMANCE_CASES) {
    it(c.name, async (ctx) => {
      const cluster = await startEmbedded();
      try {
        const outcome = await runCase(c, new ClusterClient(cluster.url));
        if (outcome.status === 'skip') ctx.skip(outcome.reason);
        expect(formatOutcome(outcome)).toBe(`PASS ${c.name}`);
      } finally {
        await cluster.close();
      }
    });
  }
});

describe('conformance: the whole suite against one long-lived cluster', () => {
  it('passes every case in order on one cluster', { timeout: 600_000 }, async () => {
    const cluster = await startEmbedded();
    try {
      const outcomes = await runSuite(new ClusterClient(cluster.url));
      expect(outcomes.filter((o) => o.status === 'fail').map(formatOutcome)).toEqual([]);
      expect(outcomes.filter((o) => o.status === 'pass').length).toBeGreaterThan(CONFORMANCE_CASES.length / 2);
    } finally {
      await cluster.close();
    }
  });
});
