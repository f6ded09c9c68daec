/**
 * The conformance suite against the reference cluster, which offers every test control: so every case must
 * pass, and a skip is a failure here. Each case on its own fresh stepped cluster; the whole suite in order on
 * one stepped cluster; and the whole suite on a wall-clock cluster that also holds partitions and nodes the
 * suite did not create, which must be exactly as they were afterwards.
 */
import { describe, expect, it } from 'vitest';
import { ClusterClient } from '../../cluster/client';
import { CONFORMANCE_CASES } from '../../cluster/conformance/cases';
import { startEmbedded } from '../../cluster/conformance/embedded';
import { replicasOf } from '../../cluster/conformance/harness';
import {
  SharedBrokerError,
  formatOutcome,
  prepare,
  runCase,
  runSuite,
  summary,
  type Outcome,
} from '../../cluster/conformance/runner';
import type { Topology } from '../../cluster/contract';

/** Every case passed: a failure or a skip shows up here with its reason. */
function expectAllPassed(outcomes: Outcome[]): void {
  expect(outcomes.filter((o) => o.status !== 'pass').map(formatOutcome)).toEqual([]);
  expect(outcomes.map((o) => o.name)).toEqual(CONFORMANCE_CASES.map((c) => c.name));
}

/** What the suite must leave as it found it: every node and partition that existed before it ran. */
function others(topo: Topology, before: Topology) {
  const nodes = new Set(before.nodes.map((n) => n.id));
  const partitions = new Set(before.partitions.map((p) => p.id));
  return {
    nodes: topo.nodes.filter((n) => nodes.has(n.id)),
    partitions: topo.partitions.filter((p) => partitions.has(p.id)),
  };
}

describe('conformance: a fresh reference cluster per case (stepped clock)', () => {
  for (const c of CONFORMANCE_CASES) {
    it(c.name, async () => {
      const cluster = await startEmbedded();
      try {
        const client = new ClusterClient(cluster.url);
        expect(formatOutcome(await runCase(c, await prepare(client)))).toBe(`PASS ${c.name}`);
      } finally {
        await cluster.close();
      }
    });
  }
});

describe('conformance: the whole suite against one long-lived cluster', () => {
  it('stepped clock: every case passes in order, none skipped', { timeout: 600_000 }, async () => {
    const cluster = await startEmbedded();
    try {
      const outcomes = await runSuite(new ClusterClient(cluster.url));
      console.log(`${summary(outcomes)} (stepped clock, one cluster)`);
      expectAllPassed(outcomes);
    } finally {
      await cluster.close();
    }
  });

  it(
    'wall clock, beside partitions it did not create: every case passes and the others are left as they were',
    { timeout: 600_000 },
    async () => {
      // Shaped like `npm start`'s cluster (5 nodes, 12 queues, 1 stream), with a grace period short enough to
      // watch a retained copy expire and transfers fast enough to keep the run short.
      const cluster = await startEmbedded({
        clock: 'wall',
        nodes: 5,
        partitions: 12,
        streams: 1,
        config: { retainGraceMs: 3_000, transferBytesPerSec: 16 * 1024 * 1024 },
      });
      try {
        const client = new ClusterClient(cluster.url);
        const before = await client.topology();
        await expect(prepare(client)).rejects.toThrow(SharedBrokerError);

        const readOnly = await runSuite(client, { readOnly: true });
        console.log(`${summary(readOnly)} (wall clock, --read-only)`);
        const reads = CONFORMANCE_CASES.filter((c) => c.readOnly).map((c) => c.name);
        expect(readOnly.filter((o) => o.status === 'pass').map((o) => o.name)).toEqual(reads);
        expect(readOnly.filter((o) => o.status === 'fail').map(formatOutcome)).toEqual([]);
        const afterReads = await client.topology();
        expect(afterReads.nodes.map((n) => n.id)).toEqual(before.nodes.map((n) => n.id));
        expect(afterReads.partitions.map((p) => p.id)).toEqual(before.partitions.map((p) => p.id));

        const outcomes = await runSuite(client, { allowShared: true });
        console.log(`${summary(outcomes)} (wall clock, beside ${before.partitions.length} other partitions)`);
        expectAllPassed(outcomes);

        const after = await client.topology();
        // Records carry no moving offsets: any difference is a change the suite made to what was not its own.
        expect(others(after, before)).toEqual(others(before, before));
        const own = after.partitions.filter((p) => !before.partitions.some((b) => b.id === p.id));
        expect(own.length).toBeGreaterThan(0);
        for (const p of own) {
          expect({ id: p.id, learners: p.learners, leaving: p.leaving, admission: p.admission, recovery: p.pendingRecovery }).toEqual(
            { id: p.id, learners: [], leaving: null, admission: 'open', recovery: null },
          );
          expect(p.history.filter((h) => h.suspended)).toEqual([]);
          expect(replicasOf(p).every((n) => after.nodes.find((x) => x.id === n)?.live)).toBe(true);
        }
        expect(after.nodes.filter((n) => !n.live || n.draining).map((n) => n.id)).toEqual([]);
        expect((await client.syncBudget()).transfers).toEqual([]);
      } finally {
        await cluster.close();
      }
    },
  );
});
