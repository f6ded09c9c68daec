/**
 * The conformance suite against the reference cluster, which offers every test control: so every case must
 * pass, and a skip is a failure here. Each case on its own fresh stepped cluster; the whole suite in order on
 * one stepped cluster; and the whole suite on a wall-clock cluster that also holds partitions and nodes the
 * suite did not create. After every run the topology is exactly what it was before: the suite deletes what it
 * created.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ClusterClient } from '../../cluster/client';
import { CONFORMANCE_CASES } from '../../cluster/conformance/cases';
import { startEmbedded } from '../../cluster/conformance/embedded';
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

/** What the suite must leave as it found it: its nodes and partitions (ids), and their records. */
function shape(topo: Topology) {
  return { nodes: topo.nodes, partitions: topo.partitions };
}

/** Paths only the reference cluster's test controls serve: a production broker answers 404 on them. */
const CONTROL_ROUTE =
  /^(GET \/v1\/controls|GET \/v1\/invariants|GET \/v1\/clock|POST \/v1\/clock\/advance|POST \/v1\/faults|POST \/v1\/nodes|POST \/v1\/partitions|POST \/v1\/partitions\/[^/]+\/(publish|rate)|DELETE \/v1\/(partitions|nodes)\/[^/]+)(\?|$)/;

/** A proxy in front of the reference cluster that offers the contract only, as a production broker would. */
async function contractOnly(target: string): Promise<{ url: string; server: Server }> {
  const upstream = new URL(target);
  const server = createServer((req, res) => {
    if (CONTROL_ROUTE.test(`${req.method} ${req.url}`)) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'not_found', message: `no route ${req.method} ${req.url}`, issues: [] }));
      return;
    }
    const forward = request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (reply) => {
        res.writeHead(reply.statusCode ?? 502, reply.headers);
        reply.pipe(res);
      },
    );
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('conformance: a fresh reference cluster per case (stepped clock)', () => {
  for (const c of CONFORMANCE_CASES) {
    it(c.name, async () => {
      const cluster = await startEmbedded();
      try {
        const client = new ClusterClient(cluster.url);
        const before = await client.topology();
        expect(formatOutcome(await runCase(c, await prepare(client)))).toBe(`PASS ${c.name}`);
        expect(shape(await client.topology())).toEqual(shape(before));
      } finally {
        await cluster.close();
      }
    });
  }
});

describe('conformance: a broker without test controls', () => {
  it('runs the cases that need none, skips the others naming the control, and changes nothing', async () => {
    const cluster = await startEmbedded({ clock: 'wall', nodes: 5, partitions: 4, streams: 1 });
    const proxy = await contractOnly(cluster.url);
    try {
      const client = new ClusterClient(proxy.url);
      expect(await client.controls()).toBeNull();
      const before = await client.topology();
      const outcomes = await runSuite(client, { allowShared: true });
      console.log(`${summary(outcomes)} (wall clock, no test controls)`);
      expect(outcomes.filter((o) => o.status === 'fail').map(formatOutcome)).toEqual([]);
      const runnable = CONFORMANCE_CASES.filter((c) => c.needs.length === 0).map((c) => c.name);
      expect(outcomes.filter((o) => o.status === 'pass').map((o) => o.name)).toEqual(runnable);
      for (const o of outcomes.filter((x) => x.status === 'skip')) {
        expect(o).toMatchObject({ reason: expect.stringMatching(/^needs the test control\(s\) .*create-partition/) });
      }
      expect(shape(await client.topology())).toEqual(shape(before));
    } finally {
      await new Promise((resolve) => proxy.server.close(resolve));
      await cluster.close();
    }
  });

  it('describes the test controls apart from the contract in the OpenAPI document', async () => {
    const cluster = await startEmbedded();
    try {
      const doc = (await (await fetch(`${cluster.url}/openapi.json`)).json()) as {
        tags: { name: string }[];
        paths: Record<string, Record<string, { tags?: string[] }>>;
      };
      expect(doc.tags.map((t) => t.name)).toEqual(['contract', 'test-controls']);
      for (const [path, item] of Object.entries(doc.paths)) {
        for (const [method, op] of Object.entries(item)) {
          const route = `${method.toUpperCase()} ${path.replace('{id}', 'x')}`;
          expect({ route, tags: op.tags }).toEqual({ route, tags: [CONTROL_ROUTE.test(route) ? 'test-controls' : 'contract'] });
        }
      }
    } finally {
      await cluster.close();
    }
  });
});

describe('conformance: the whole suite against one long-lived cluster', () => {
  it('stepped clock: every case passes in order, none skipped', { timeout: 600_000 }, async () => {
    const cluster = await startEmbedded();
    try {
      const client = new ClusterClient(cluster.url);
      const before = await client.topology();
      const outcomes = await runSuite(client);
      console.log(`${summary(outcomes)} (stepped clock, one cluster)`);
      expectAllPassed(outcomes);
      expect(shape(await client.topology())).toEqual(shape(before));
    } finally {
      await cluster.close();
    }
  });

  it(
    'wall clock, beside partitions it did not create: every case passes and the others are left as they were',
    { timeout: 600_000 },
    async () => {
      // Shaped like `npm start`'s cluster (5 nodes, 12 queues, 1 stream), with a grace period short enough to
      // watch a retained copy expire and transfers fast enough to keep the run short; recovery waits long
      // enough for every refusal of a pending recovery to be seen on a loaded machine.
      const cluster = await startEmbedded({
        clock: 'wall',
        nodes: 5,
        partitions: 12,
        streams: 1,
        config: { retainGraceMs: 3_000, transferBytesPerSec: 16 * 1024 * 1024, recoveryDelayMs: 4_000 },
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

        // Records carry no moving offsets: the suite deleted every node and partition it created, and any
        // difference in the others is a change it made to what was not its own.
        const after = await client.topology();
        console.log(
          `topology after the wall-clock run: ${after.nodes.length} nodes, ${after.partitions.length} partitions ` +
            `(before: ${before.nodes.length}, ${before.partitions.length})`,
        );
        expect(shape(after)).toEqual(shape(before));
        expect((await client.syncBudget()).transfers).toEqual([]);
      } finally {
        await cluster.close();
      }
    },
  );
});
