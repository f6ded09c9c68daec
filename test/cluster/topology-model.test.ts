/**
 * The worker's and admin service's topology model (cluster/model.ts) over the reference cluster's core: changes
 * reads between whole reads, a whole read when the broker cannot list the changes, and drift counted when a whole
 * read finds a record the changes read missed.
 */
import { describe, expect, it } from 'vitest';
import { ClusterHttpError } from '../../cluster/client';
import { conformingChanges } from '../../cluster/conforming';
import { TopologyChanges } from '../../cluster/contract';
import { assignmentOf, TopologyModel } from '../../cluster/model';
import { ClusterSim } from '../../cluster/sim/sim';

function setup(options: { dropFromChanges?: string; gone?: boolean; notOffered?: boolean } = {}) {
  const sim = ClusterSim.create({ nodes: 5, partitions: 20, streams: 0 });
  let clock = 0;
  const warnings: string[] = [];
  const client = {
    topology: async () => sim.topology(),
    topologyChanges: async (after: number) => {
      if (options.notOffered) throw new ClusterHttpError(404, 'GET', '/v1/topology/changes', { error: 'not_found', message: 'no route' });
      if (options.gone) return null;
      const changes = sim.changesSince(after);
      if (changes === null || options.dropFromChanges === undefined) return changes;
      return { ...changes, partitions: changes.partitions.filter((p) => p.id !== options.dropFromChanges) };
    },
  };
  const model = new TopologyModel(client, {
    fullEveryMs: 60_000,
    now: () => clock,
    log: { debug: () => {}, info: () => {}, warn: (_obj, msg) => warnings.push(msg) },
  });
  const addLearner = (id: string, node: string) => {
    const p = sim.partition(id);
    const r = sim.write(id, 'add-learner', { expectedGeneration: p.generation, idempotencyKey: `k-${id}-${node}`, node });
    expect(r.ok).toBe(true);
  };
  return { sim, model, warnings, addLearner, tick: (ms: number) => (clock += ms) };
}

const learnersOf = async (model: TopologyModel, id: string) => (await model.read()).partitions.find((p) => p.id === id)!.learners;

describe('the topology model', () => {
  it('reads whole once, then only changes, and matches a whole read after each write', async () => {
    const { sim, model, addLearner, tick } = setup();
    await model.read();
    const target = [...sim.nodes.keys()].find((n) => !(n in sim.partition('q-3').replicas))!;
    addLearner('q-3', target);
    tick(1_000);
    expect(await learnersOf(model, 'q-3')).toEqual([target]);
    const read = await model.read();
    expect(read.partitions.map(assignmentOf)).toEqual(sim.topology().partitions.map(assignmentOf));
    expect(model.counts()).toMatchObject({ fullReads: 1, changesReads: 2, fallbacks: 0, drifts: 0 });
    tick(60_000);
    await model.read();
    await model.checked();
    expect(model.counts()).toMatchObject({ fullReads: 2, drifts: 0 });
  });

  it('counts and logs a record the changes read missed, and the whole read puts it right', async () => {
    const { sim, model, warnings, addLearner, tick } = setup({ dropFromChanges: 'q-5' });
    await model.read();
    const target = [...sim.nodes.keys()].find((n) => !(n in sim.partition('q-5').replicas))!;
    addLearner('q-5', target);
    expect(await learnersOf(model, 'q-5')).toEqual([]);
    tick(60_000);
    // The check runs beside the read, which still answers from the model; once it is done, the model is right.
    expect(await learnersOf(model, 'q-5')).toEqual([]);
    await model.checked();
    expect(await learnersOf(model, 'q-5')).toEqual([target]);
    expect(model.counts().drifts).toBe(1);
    expect(warnings.join('\n')).toMatch(/1 partition record\(s\) different/);
  });

  it('reads whole when the broker cannot list the changes (410) or does not offer the read (404)', async () => {
    for (const [options, counted] of [[{ gone: true }, { fallbacks: 2 }], [{ notOffered: true }, { fallbacks: 1 }]] as const) {
      const { sim, model, addLearner } = setup(options);
      await model.read();
      const target = [...sim.nodes.keys()].find((n) => !(n in sim.partition('q-1').replicas))!;
      addLearner('q-1', target);
      expect(await learnersOf(model, 'q-1')).toEqual([target]);
      await model.read();
      expect(model.counts()).toMatchObject({ fullReads: 3, changesReads: 0, ...counted });
    }
  });

  it('takes a changes body the schema accepts by hand, and leaves one it refuses to zod', () => {
    const sim = ClusterSim.create({ nodes: 4, partitions: 3, streams: 0 });
    const before = sim.generation;
    sim.createPartition('extra', 'queue', ['n1', 'n2', 'n3']);
    sim.deletePartition('q-0');
    const body = () => JSON.parse(JSON.stringify(sim.changesSince(before))) as Record<string, unknown>;
    expect(conformingChanges(body())).toEqual(TopologyChanges.parse(body()));
    for (const broken of [{ removed: ['not an id!'] }, { removed: 'q-0' }, { extra: 1 }, { partitions: [{ id: 'q-1' }] }]) {
      const bad = { ...body(), ...broken };
      expect(conformingChanges(bad), JSON.stringify(broken)).toBeNull();
      expect(TopologyChanges.safeParse(bad).success === false || 'extra' in broken, JSON.stringify(broken)).toBe(true);
    }
  });
});
