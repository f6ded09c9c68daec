/**
 * What the planner reads per partition without a progress read each: the retained history in bytes, the
 * traffic (publish and delivery rates, summed per owning node), and for each retained copy the bytes a
 * learner on that node would copy now. Per-partition rates and message sizes are set when a test creates a
 * partition, and data directories written before they existed still load.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { ClusterClient } from '../../cluster/client';
import type { Partition } from '../../cluster/contract';
import { startCluster, type RunningCluster } from '../../cluster/server';
import { ClusterSim } from '../../cluster/sim/sim';
import { fastConfig, makeSim, untilAdmitted, write } from './helpers';

const running: RunningCluster[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const c of running.splice(0)) await c.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function record(sim: ClusterSim, id: string): Partition {
  return sim.topology().partitions.find((p) => p.id === id)!;
}

/** n7 and n8 empty; h-0 on n1 n2 n3 with its own rate and message size. */
function simWithPartition(publishRate: number, messageBytes: number): ClusterSim {
  const sim = ClusterSim.create({ nodes: 6, partitions: 0, streams: 0, config: fastConfig });
  sim.joinNode('n7');
  sim.joinNode('n8');
  sim.createPartition('h-0', 'queue', ['n1', 'n2', 'n3'], { publishRate, messageBytes });
  return sim;
}

describe('historyBytes', () => {
  it('is the owner log after truncation, in this partition’s message size: grows with publishes, drops with truncation', () => {
    const sim = simWithPartition(0, 250);
    const start = sim.progress('h-0');
    expect(start.messageBytes).toBe(250);
    expect(record(sim, 'h-0').historyBytes).toBe((start.tail - start.logStart) * 250);
    expect(record(sim, 'h-0').historyBytes).toBe(fastConfig.retainMessages! * 250);

    sim.publish('h-0', 300);
    expect(record(sim, 'h-0').historyBytes).toBe((fastConfig.retainMessages! + 300) * 250);

    sim.advance(1_000);
    const after = sim.progress('h-0');
    expect(after.logStart).toBeGreaterThan(start.logStart);
    expect(record(sim, 'h-0').historyBytes).toBe(fastConfig.retainMessages! * 250);
  });

  it('follows an anchored (unstepped) partition’s offsets in closed form', () => {
    const sim = simWithPartition(10, 100);
    sim.advance(10_000);
    const p = record(sim, 'h-0');
    const progress = sim.progress('h-0');
    expect(progress.tail).toBeGreaterThan(fastConfig.initialMessages! + 90);
    expect(p.historyBytes).toBe((progress.tail - progress.logStart) * 100);
  });
});

describe('rates', () => {
  it('follow the partition’s setting while the owner serves; a node’s rates are the sums over the partitions it owns', () => {
    const sim = simWithPartition(40, 100);
    sim.createPartition('h-1', 'queue', ['n1', 'n4'], { publishRate: 2.5 });
    sim.createPartition('h-2', 'queue', ['n4', 'n1'], { publishRate: 7 });
    const t = sim.topology();
    expect(t.partitions.map((p) => [p.id, p.publishRate, p.deliveryRate])).toEqual([
      ['h-0', 40, 40],
      ['h-1', 2.5, 2.5],
      ['h-2', 7, 7],
    ]);
    const n1 = t.nodes.find((n) => n.id === 'n1')!;
    expect([n1.publishRate, n1.deliveryRate]).toEqual([42.5, 42.5]);
    expect(t.nodes.find((n) => n.id === 'n4')!.publishRate).toBe(7);
    expect(t.nodes.find((n) => n.id === 'n2')!.publishRate).toBe(0);

    const before = sim.progress('h-0').tail;
    sim.advance(1_000);
    expect(sim.progress('h-0').tail - before).toBe(40);

    sim.setRate('h-1', 0);
    expect(sim.nodesView().nodes.find((n) => n.id === 'n1')!.publishRate).toBe(40);
    sim.fault({ fault: 'crash-node', node: 'n1' });
    const down = sim.topology();
    expect(down.partitions.find((p) => p.id === 'h-0')!.publishRate).toBe(0);
    expect(down.nodes.find((n) => n.id === 'n1')!.publishRate).toBe(0);
  });

  it('of the nodes follow every change between two reads: a rate set, a node down and up, an owner replaced', () => {
    const sim = simWithPartition(40, 100);
    sim.createPartition('h-1', 'queue', ['n4', 'n1'], { publishRate: 7 });
    const rate = (node: string) => sim.nodesView().nodes.find((n) => n.id === node)!.publishRate;
    // Each node's rate is the sum of its owned records' rates (0 while the owner does not serve), at every read.
    const sums = () => {
      const t = sim.topology();
      return Object.fromEntries(t.nodes.map((n) => [n.id, t.partitions.filter((p) => p.owner === n.id).reduce((a, p) => a + p.publishRate, 0)]));
    };
    const same = () => expect(Object.fromEntries(sim.nodesView().nodes.map((n) => [n.id, n.publishRate]))).toEqual(sums());
    expect([rate('n1'), rate('n4')]).toEqual([40, 7]);
    sim.setRate('h-0', 10);
    expect(rate('n1')).toBe(10);
    same();
    sim.fault({ fault: 'crash-node', node: 'n4' });
    expect(rate('n4')).toBe(0);
    same();
    sim.fault({ fault: 'restart-node', node: 'n4' });
    same();
    sim.advance(30_000);
    same();
    // h-0's owner fails: nothing served while the recovery is pending, then the new owner carries the rate.
    const before = rate('n1');
    sim.fault({ fault: 'fail-owner', partition: 'h-0' });
    expect(rate('n1')).toBe(before - 10);
    same();
    sim.advance(30_000);
    const owner = sim.topology().partitions.find((p) => p.id === 'h-0')!.owner;
    expect(owner).not.toBe('n1');
    same();
  });

  it('default to the cluster’s configured rate and message size', () => {
    const sim = makeSim();
    expect(record(sim, 'q-0').publishRate).toBe(fastConfig.publishRate);
    expect(sim.progress('q-0').messageBytes).toBe(fastConfig.messageBytes);
  });
});

describe('bytesToCatchUp of a retained copy', () => {
  it('is the bytes after the copy’s offset, and the whole history once the owner truncated past it', () => {
    const sim = simWithPartition(0, 200);
    expect(write(sim, 'h-0', 'add-learner', { node: 'n7' }).ok).toBe(true);
    untilAdmitted(sim, 'h-0', 'n7');
    expect(write(sim, 'h-0', 'drop-learner', { node: 'n7' }).ok).toBe(true);
    const copy = () => record(sim, 'h-0').retainedCopies.find((c) => c.node === 'n7')!;
    const { tail } = sim.progress('h-0');
    expect(copy().bytesToCatchUp).toBe((tail - copy().durableOffset) * 200);

    sim.publish('h-0', 30);
    expect(copy().bytesToCatchUp).toBe((tail + 30 - copy().durableOffset) * 200);

    sim.publish('h-0', 5_000);
    sim.advance(1_000);
    expect(sim.progress('h-0').logStart).toBeGreaterThan(copy().durableOffset);
    expect(copy().bytesToCatchUp).toBe(record(sim, 'h-0').historyBytes);
  });

  it('of a learner dropped before it copied anything is the whole history', () => {
    const sim = simWithPartition(0, 100);
    expect(write(sim, 'h-0', 'add-learner', { node: 'n8' }).ok).toBe(true);
    expect(write(sim, 'h-0', 'drop-learner', { node: 'n8' }).ok).toBe(true);
    const p = record(sim, 'h-0');
    expect(p.retainedCopies).toEqual([expect.objectContaining({ node: 'n8', durableOffset: 0, bytesToCatchUp: p.historyBytes })]);
  });
});

describe('over HTTP', () => {
  it('creates a partition with its own rate and message size, and refuses bad settings changing nothing', async () => {
    const cluster = await startCluster({ clock: 'stepped', partitions: 0, streams: 0, config: fastConfig });
    running.push(cluster);
    const client = new ClusterClient(cluster.url);
    const view = await client.createPartition({ id: 'hot-0', replicas: ['n1', 'n2'], publishRate: 500, messageBytes: 4096 });
    expect(view.partition).toMatchObject({ publishRate: 500, deliveryRate: 500 });
    expect(view.progress.messageBytes).toBe(4096);
    expect(view.partition.historyBytes).toBe((view.progress.tail - view.progress.logStart) * 4096);
    expect((await client.nodes()).nodes.find((n) => n.id === 'n1')!.publishRate).toBe(500);

    for (const bad of [{ publishRate: -1 }, { messageBytes: 0 }, { messageBytes: 1.5 }]) {
      const res = await fetch(`${cluster.url}/v1/partitions`, {
        method: 'POST',
        body: JSON.stringify({ id: 'hot-1', replicas: ['n1'], ...bad }),
      });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { issues: { path: string }[] };
      expect(body.issues.map((i) => i.path)).toEqual(Object.keys(bad));
    }
    expect((await client.topology()).partitions.map((p) => p.id)).toEqual(['hot-0']);
  });

  it('loads a data directory written before partitions had their own message size', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cluster-old-partitions-'));
    dirs.push(dir);
    await (await startCluster({ clock: 'stepped', partitions: 2, streams: 0, data: dir, config: { ...fastConfig, messageBytes: 300 } })).close();
    const db = new Database(path.join(dir, 'cluster.db'));
    for (const row of db.prepare<[], { id: string; json: string }>('SELECT id, json FROM partitions').all()) {
      const { messageBytes: _dropped, ...old } = JSON.parse(row.json) as Record<string, unknown>;
      db.prepare('UPDATE partitions SET json = ? WHERE id = ?').run(JSON.stringify(old), row.id);
    }
    db.close();

    const cluster = await startCluster({ clock: 'stepped', data: dir });
    running.push(cluster);
    expect(cluster.resumed).toBe(true);
    const client = new ClusterClient(cluster.url);
    await client.advance(1_000);
    const t = await client.topology();
    for (const p of t.partitions) {
      const progress = await client.progress(p.id);
      expect(progress.messageBytes).toBe(300);
      expect(p.historyBytes).toBe((progress.tail - progress.logStart) * 300);
    }
  });
});
