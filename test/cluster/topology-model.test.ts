/**
 * The worker's and admin service's topology model (cluster/model.ts) over the reference cluster's core: changes
 * reads between whole reads, a whole read when the broker cannot list the changes, and drift counted when a whole
 * read finds a record the changes read missed.
 */
import { describe, expect, it } from 'vitest';
import { ClusterHttpError } from '../../cluster/client';
import { conformingChanges, conformingPage } from '../../cluster/conforming';
import { TopologyChanges, TopologyPage } from '../../cluster/contract';
import { assignmentOf, TopologyModel } from '../../cluster/model';
import { ClusterSim } from '../../cluster/sim/sim';

function setup(options: { partitions?: number; dropFromChanges?: string; gone?: boolean; notOffered?: boolean; pages?: 'offered' | 'not offered'; checkPage?: number; hideRemoved?: boolean; afterPage?: () => void } = {}) {
  const sim = ClusterSim.create({ nodes: 5, partitions: options.partitions ?? 20, streams: 0 });
  let clock = 0;
  const warnings: string[] = [];
  const client = {
    topology: async () => sim.topology(),
    topologyChanges: async (after: number) => {
      if (options.notOffered) throw new ClusterHttpError(404, 'GET', '/v1/topology/changes', { error: 'not_found', message: 'no route' });
      if (options.gone) return null;
      const changes = sim.changesSince(after);
      if (changes === null) return changes;
      return {
        ...changes,
        partitions: changes.partitions.filter((p) => p.id !== options.dropFromChanges),
        removed: options.hideRemoved ? [] : changes.removed,
      };
    },
    ...(options.pages === undefined
      ? {}
      : {
          topologyPage: async (after: string | null, limit: number) => {
            pagesRead++;
            if (options.pages === 'not offered') throw new ClusterHttpError(404, 'GET', '/v1/topology/page', { error: 'not_found', message: 'no route' });
            const page = sim.topologyPage(after ?? undefined, limit);
            options.afterPage?.();
            return page;
          },
        }),
  };
  let pagesRead = 0;
  const model = new TopologyModel(client, {
    fullEveryMs: 60_000,
    ...(options.checkPage === undefined ? {} : { checkPage: options.checkPage }),
    now: () => clock,
    log: { debug: () => {}, info: () => {}, warn: (_obj, msg) => warnings.push(msg) },
  });
  const addLearner = (id: string, node: string) => {
    const p = sim.partition(id);
    const r = sim.write(id, 'add-learner', { expectedGeneration: p.generation, idempotencyKey: `k-${id}-${node}`, node });
    expect(r.ok).toBe(true);
  };
  /** Reads on, a clock's step apart, until a pass of the check's pages has ended. */
  const pass = async () => {
    const from = model.counts().pageReads;
    const pages = Math.ceil(sim.partitions.size / (options.checkPage ?? 2_000));
    clock += 60_000;
    for (let i = 0; i < 100 && model.counts().pageReads - from < pages; i++) {
      await model.read();
      await model.checked();
      clock += 1_000;
    }
  };
  return { sim, model, warnings, addLearner, tick: (ms: number) => (clock += ms), pass, pagesRead: () => pagesRead };
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

describe('the topology model checked a page at a time', () => {
  it('takes a page the schema accepts by hand, and leaves one it refuses to zod', () => {
    const sim = ClusterSim.create({ nodes: 4, partitions: 5, streams: 0 });
    for (const body of [() => JSON.parse(JSON.stringify(sim.topologyPage(undefined, 2))), () => JSON.parse(JSON.stringify(sim.topologyPage('q-3', 2)))]) {
      expect(conformingPage(body())).toEqual(TopologyPage.parse(body()));
      for (const broken of [{ next: 'not an id!' }, { next: 3 }, { extra: 1 }, { partitions: [{ id: 'q-1' }] }]) {
        const bad = { ...body(), ...broken };
        expect(conformingPage(bad), JSON.stringify(broken)).toBeNull();
        expect(TopologyPage.safeParse(bad).success === false || 'extra' in broken, JSON.stringify(broken)).toBe(true);
      }
    }
    expect(sim.topologyPage('q-3', 2).next).toBeNull();
    expect(sim.topologyPage(undefined, 2)).toMatchObject({ next: 'q-1' });
  });


  it('passes over every record in pages, none whole after the first read, and finds a record the changes read missed', async () => {
    const { sim, model, warnings, addLearner, pass } = setup({ pages: 'offered', checkPage: 6, dropFromChanges: 'q-15' });
    await model.read();
    const target = [...sim.nodes.keys()].find((n) => !(n in sim.partition('q-15').replicas))!;
    addLearner('q-15', target);
    expect(await learnersOf(model, 'q-15')).toEqual([]);
    await pass();
    expect(await learnersOf(model, 'q-15')).toEqual([target]);
    // The first read in one page of up to 10,000 records, the check in pages of 6.
    expect(model.counts()).toMatchObject({ fullReads: 1, pageReads: 5, drifts: 1 });
    expect(warnings.join('\n')).toMatch(/1 partition record\(s\) different/);
    expect((await model.read()).partitions.map(assignmentOf).sort()).toEqual(sim.topology().partitions.map(assignmentOf).sort());
  });

  it('keeps a write made after a page was read: the changes read has it, newer than the page', async () => {
    let wrote = false;
    const later = { write: () => {} };
    const { sim, model, addLearner, pass } = setup({ pages: 'offered', checkPage: 6, afterPage: () => later.write() });
    const target = [...sim.nodes.keys()].find((n) => !(n in sim.partition('q-1').replicas))!;
    later.write = () => {
      if (wrote) return;
      wrote = true;
      addLearner('q-1', target);
    };
    await model.read();
    await pass();
    expect(wrote).toBe(true);
    expect(await learnersOf(model, 'q-1')).toEqual([target]);
    expect(model.counts().drifts).toBe(0);
  });

  it('reads the whole topology in pages, a write between two pages brought in by the changes read', async () => {
    let pages = 0;
    const holder = { sim: null as ClusterSim | null, addLearner: (_id: string, _node: string) => {} };
    const target = 'n5';
    const { sim, model, addLearner } = setup({
      partitions: 12_000,
      pages: 'offered',
      afterPage: () => {
        // After the first page: a record of the first page changes, and one partition goes.
        if (pages++ === 0) {
          holder.addLearner('q-0', target);
          holder.sim!.deletePartition('q-99');
        }
      },
    });
    holder.sim = sim;
    holder.addLearner = addLearner;
    expect(sim.partition('q-0').replicas[target]).toBeUndefined();
    const read = await model.read();
    expect(pages).toBe(2);
    expect(model.counts()).toMatchObject({ fullReads: 1, pageReads: 2 });
    // In id order, where the whole read lists them as the broker keeps them.
    expect(read.partitions.map(assignmentOf).sort()).toEqual(sim.topology().partitions.map(assignmentOf).sort());
    expect(read.partitions.find((p) => p.id === 'q-0')!.learners).toEqual([target]);
  });

  it('finds a partition deleted, and one created, that the changes read did not list', async () => {
    const { sim, model, pass } = setup({ pages: 'offered', checkPage: 6, hideRemoved: true, dropFromChanges: 'q-99' });
    await model.read();
    sim.deletePartition('q-7');
    sim.createPartition('q-99', 'queue', ['n1', 'n2', 'n3']);
    expect((await model.read()).partitions.map((p) => p.id)).toContain('q-7');
    await pass();
    const ids = (await model.read()).partitions.map((p) => p.id);
    expect(ids).not.toContain('q-7');
    expect(ids).toContain('q-99');
    expect(ids).toHaveLength(sim.partitions.size);
    expect(model.counts().drifts).toBe(2);
  });

  it("brings the advisory figures that moved, and keeps every other record as the same object and the rest of a refreshed one (a kept reading's cue)", async () => {
    const { sim, model, pass } = setup({ pages: 'offered', checkPage: 6 });
    const before = await model.read();
    sim.publish('q-2', 50);
    // A publish is no assignment change: the changes read leaves the record's history bytes as they were.
    const unchanged = (await model.read()).partitions.find((p) => p.id === 'q-2')!;
    expect(unchanged.historyBytes).toBe(before.partitions.find((p) => p.id === 'q-2')!.historyBytes);
    await pass();
    const after = await model.read();
    expect(after.partitions.find((p) => p.id === 'q-2')!.historyBytes).toBe(sim.topology().partitions.find((p) => p.id === 'q-2')!.historyBytes);
    expect(after.partitions.find((p) => p.id === 'q-2')!.historyBytes).toBeGreaterThan(unchanged.historyBytes);
    const same = after.partitions.filter((p, i) => p === before.partitions[i]).length;
    expect(same).toBe(before.partitions.length - 1);
    // The refreshed record shares the rest with the one it replaces: the planner reads only its figures again.
    const [was, now] = [before, after].map((t) => t.partitions.find((p) => p.id === 'q-2')!);
    expect(now).not.toBe(was);
    expect([now!.followers, now!.learners, now!.history].every((a, i) => a === [was!.followers, was!.learners, was!.history][i])).toBe(true);
    expect(model.counts()).toMatchObject({ fullReads: 1, drifts: 0 });
  });

  it('checks with one whole read where the broker has no pages (404)', async () => {
    const { model, tick, pagesRead } = setup({ pages: 'not offered' });
    await model.read();
    tick(60_000);
    for (let i = 0; i < 3; i++) {
      await model.read();
      await model.checked();
    }
    expect(pagesRead()).toBe(1);
    expect(model.counts()).toMatchObject({ fullReads: 2, pageReads: 0 });
  });
});
