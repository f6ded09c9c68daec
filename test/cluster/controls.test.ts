/**
 * The delete controls a test uses to leave the topology as it found it: a deleted partition gives back its
 * transfer slots and is gone for good (also after a restart from SQLite); a node is deleted only once nothing
 * holds it, and otherwise refused naming every use, changing nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ClusterClient, ClusterHttpError } from '../../cluster/client';
import { startCluster, type RunningCluster } from '../../cluster/server';
import { ClusterSim } from '../../cluster/sim/sim';
import { ClusterStore } from '../../cluster/store';
import { fastConfig, makeSim, write } from './helpers';

const dirs: string[] = [];
const running: RunningCluster[] = [];
afterEach(async () => {
  for (const c of running.splice(0)) await c.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'cluster-controls-'));
  dirs.push(d);
  return d;
}

/** The slots in use: cluster-wide and per node that has any. */
function slots(sim: ClusterSim) {
  const b = sim.syncBudget();
  return { cluster: b.clusterInUse, nodes: b.nodes.filter((n) => n.inUse > 0).map((n) => n.node), transfers: b.transfers.length };
}

describe('delete controls in the simulation', () => {
  it('a deleted partition gives back its transfer slots and its retained copies, and time goes on without it', () => {
    const sim = makeSim();
    sim.joinNode('n7');
    sim.joinNode('n8');
    expect(write(sim, 'q-0', 'add-learner', { node: 'n7' }).ok).toBe(true);
    expect(write(sim, 'q-1', 'add-learner', { node: 'n8' }).ok).toBe(true);
    expect(write(sim, 'q-1', 'drop-learner', { node: 'n8' }).ok).toBe(true);
    expect(slots(sim)).toEqual({ cluster: 1, nodes: ['n7'], transfers: 1 });

    sim.deletePartition('q-0');
    sim.deletePartition('q-1');
    expect(slots(sim)).toEqual({ cluster: 0, nodes: [], transfers: 0 });
    expect(sim.topology().partitions.map((p) => p.id)).toEqual(['q-2', 's-0']);
    expect(sim.hasPartition('q-0')).toBe(false);
    sim.advance(sim.config.retainGraceMs + 1_000);
    expect(sim.invariants().breaches).toEqual([]);
    expect(sim.takeChanges().partitions.map((p) => p.id)).not.toContain('q-0');
  });

  it('a node is deleted only once no partition holds it, and a refusal names every use', () => {
    const sim = makeSim();
    expect(sim.nodeInUse('n1')).toEqual(['owner of q-0']);
    expect(sim.nodeInUse('n3')).toEqual(['follower of q-0', 'follower of q-1', 'owner of q-2']);
    sim.joinNode('n7');
    expect(write(sim, 'q-0', 'add-learner', { node: 'n7' }).ok).toBe(true);
    sim.fault({ fault: 'stall-transfer', partition: 'q-2', node: 'n7', stalled: true });
    expect(sim.nodeInUse('n7')).toEqual(['learner of q-0', 'stalled transfer of q-2']);
    expect(write(sim, 'q-0', 'drop-learner', { node: 'n7' }).ok).toBe(true);
    sim.fault({ fault: 'stall-transfer', partition: 'q-2', node: 'n7', stalled: false });
    expect(sim.nodeInUse('n7')).toEqual(['retained copy of q-0']);
    const before = JSON.stringify(sim.topology());
    expect(() => sim.deleteNode('n7')).toThrow(/n7 is still in use: retained copy of q-0/);
    expect(JSON.stringify(sim.topology())).toBe(before);

    sim.deletePartition('q-0');
    expect(sim.nodeInUse('n7')).toEqual([]);
    sim.deleteNode('n7');
    expect(sim.hasNode('n7')).toBe(false);
    expect(sim.syncBudget().nodes.map((n) => n.node)).not.toContain('n7');
    expect(() => sim.nodeInUse('n7')).toThrow(/unknown node n7/);
  });

  it('a restart from SQLite after a delete does not bring the partition or the node back', () => {
    const dir = tempDir();
    const store = new ClusterStore(dir);
    const sim = makeSim();
    store.persist(sim.takeChanges());
    sim.joinNode('n7');
    expect(write(sim, 'q-0', 'add-learner', { node: 'n7' }).ok).toBe(true);
    sim.advance(200);
    store.persist(sim.takeChanges());
    sim.deletePartition('q-0');
    store.delete('partition', 'q-0', sim.takeChanges());
    sim.deleteNode('n7');
    store.delete('node', 'n7', sim.takeChanges());
    const expected = JSON.stringify(sim.topology());
    store.close();

    const reopened = new ClusterStore(dir);
    const snap = reopened.load();
    reopened.close();
    expect(snap).not.toBeNull();
    const resumed = ClusterSim.fromSnapshot(snap!);
    expect(JSON.stringify(resumed.topology())).toBe(expected);
    expect(resumed.topology().partitions.map((p) => p.id)).toEqual(['q-1', 'q-2', 's-0']);
    expect(resumed.hasNode('n7')).toBe(false);
    expect(slots(resumed)).toEqual({ cluster: 0, nodes: [], transfers: 0 });
  });
});

describe('delete controls over HTTP', () => {
  it('answers 404 for an unknown id, 409 naming the uses of a busy node (changing nothing), and keeps deletes across a restart', async () => {
    const data = tempDir();
    const first = await startCluster({ clock: 'stepped', partitions: 3, data, config: fastConfig });
    running.push(first);
    const client = new ClusterClient(first.url);
    expect((await client.controls())?.offered).toEqual(expect.arrayContaining(['delete-partition', 'delete-node']));

    await expect(client.deletePartition('nope')).rejects.toMatchObject({ status: 404 });
    await expect(client.deleteNode('nope')).rejects.toMatchObject({ status: 404 });
    const before = await client.topology();
    const busy = await client.deleteNode('n1').catch((e: unknown) => e);
    expect(busy).toBeInstanceOf(ClusterHttpError);
    expect(busy).toMatchObject({ status: 409, message: expect.stringMatching(/node n1 is still in use \(owner of q-0, follower of s-0\)/) });
    expect(await client.topology()).toEqual(before);

    await client.joinNode('n9');
    expect(await client.deletePartition('q-0')).toEqual({ deleted: 'partition', id: 'q-0' });
    expect(await client.deleteNode('n9')).toEqual({ deleted: 'node', id: 'n9' });
    const after = await client.topology();
    expect(after.partitions.map((p) => p.id)).toEqual(before.partitions.map((p) => p.id).filter((id) => id !== 'q-0'));
    expect(after.nodes.map((n) => n.id)).toEqual(before.nodes.map((n) => n.id));
    await running.pop()!.close();

    const second = await startCluster({ clock: 'stepped', data });
    running.push(second);
    expect(second.resumed).toBe(true);
    const resumed = await new ClusterClient(second.url).topology();
    expect({ nodes: resumed.nodes, partitions: resumed.partitions }).toEqual({ nodes: after.nodes, partitions: after.partitions });
  });
});
