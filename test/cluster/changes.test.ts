/**
 * The changes read (GET /v1/topology/changes) over the model tests' random sequences: a reader that holds the
 * topology at some generation and applies the changes after it holds, after every command, the same assignment as
 * a whole read (cluster/model.ts compares records the same way). Retained copies here expire within seconds, so
 * that expiries (which no write makes) happen inside the sequences; the broker restarts midway while the reader
 * lags, which must send the reader to a whole read whenever it missed a change. With a mutant that marks only writes
 * as changes, the same check fails: the test guards the rule that every change to a record is listed.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Topology } from '../../cluster/contract';
import { applyChanges, assignmentOf } from '../../cluster/model';
import { ClusterSim } from '../../cluster/sim/sim';
import type { PartitionState } from '../../cluster/sim/types';
import { Driver, emptyCoverage, newSim, scenarioArb, type Scenario } from './model-driver';

const SEQUENCES = 150;

interface Seen {
  reads: number;
  changed: number;
  expiries: number;
  diskLosses: number;
  /** Reads after a restart that the broker sent to a whole read (410). */
  restartsRefused: number;
}

function same(model: Topology, whole: Topology): string | null {
  const mine = new Map(model.partitions.map((p) => [p.id, assignmentOf(p)]));
  if (mine.size !== whole.partitions.length) return `the model holds ${mine.size} partitions, a whole read ${whole.partitions.length}`;
  for (const p of whole.partitions) {
    if (mine.get(p.id) !== assignmentOf(p)) return `${p.id} differs:\n model ${mine.get(p.id)}\n whole ${assignmentOf(p)}`;
  }
  if (JSON.stringify(model.nodes) !== JSON.stringify(whole.nodes)) return 'the nodes differ';
  return model.generation === whole.generation ? null : `generation ${model.generation}, whole read at ${whole.generation}`;
}

/** Plays a sequence, keeping a reader current through the changes read after every command; the first mismatch, or null. */
function play(s: Scenario, seen: Seen, mutate: (sim: ClusterSim) => void = () => {}): string | null {
  let sim = newSim(s.shape, s.seed);
  sim.config.retainGraceMs = 2_000;
  mutate(sim);
  let driver = new Driver(sim, emptyCoverage());
  let model = sim.topology();
  // The broker restarts once, midway, while the reader lags three commands behind: it is sent to a whole read, or
  // (when those commands changed nothing) reads the changes as before.
  const restartAt = Math.floor(s.cmds.length / 2);
  const lagging = (i: number) => i >= restartAt - 3 && i < restartAt;
  let restarted = false;
  const retained = () => [...sim.partitions.values()].reduce((n, p) => n + p.retainedCopies.length, 0);
  const step = (what: string): string | null => {
    const changes = sim.changesSince(model.generation);
    if (changes === null && restarted) {
      seen.restartsRefused++;
      model = sim.topology();
      restarted = false;
      return null;
    }
    restarted = false;
    if (changes === null) return `${what}: no changes listed after ${model.generation}`;
    seen.reads++;
    seen.changed += changes.partitions.length;
    model = applyChanges(model, changes);
    const differs = same(model, sim.topology());
    return differs === null ? null : `${what}: ${differs}\nlast steps:\n${driver.log.slice(-20).join('\n')}`;
  };
  for (const [i, c] of s.cmds.entries()) {
    if (i === restartAt) {
      const config = sim.config;
      sim = ClusterSim.fromSnapshot(JSON.parse(JSON.stringify(sim.snapshot())));
      Object.assign(sim.config, config);
      mutate(sim);
      driver = new Driver(sim, driver.cov);
      restarted = true;
    }
    const before = retained();
    const lost = c.t === 'fault' && c.kind === 'lose-disk';
    driver.run(c);
    if (retained() < before) seen[lost ? 'diskLosses' : 'expiries']++;
    if (lagging(i)) continue;
    const differs = step(JSON.stringify(c));
    if (differs) return differs;
  }
  driver.settle(s.lostForGood);
  sim.advance(5_000);
  return step('after settling');
}

describe('the changes read', () => {
  it(`keeps a reader's topology equal to a whole read after every command (${SEQUENCES} random sequences)`, () => {
    const seen: Seen = { reads: 0, changed: 0, expiries: 0, diskLosses: 0, restartsRefused: 0 };
    fc.assert(
      fc.property(scenarioArb(40, 120), (s) => {
        const differs = play(s, seen);
        if (differs) throw new Error(differs);
      }),
      { numRuns: SEQUENCES },
    );
    console.log(
      `changes read: ${seen.reads} reads, ${seen.changed} records changed, ${seen.expiries} commands expired retained copies, ${seen.diskLosses} disk losses dropped some, ${seen.restartsRefused} readers sent to a whole read by a restart`,
    );
    expect(seen.changed).toBeGreaterThan(SEQUENCES * 10);
    expect(seen.expiries).toBeGreaterThan(SEQUENCES / 5);
    expect(seen.diskLosses).toBeGreaterThan(0);
    expect(seen.restartsRefused).toBeGreaterThan(SEQUENCES / 2);
  });

  it('misses expiries with a mutant that lists only the records writes changed', () => {
    const seen: Seen = { reads: 0, changed: 0, expiries: 0, diskLosses: 0, restartsRefused: 0 };
    // Only a write's bump marks the record; an expiry or a lost disk changes it unlisted.
    const writesOnly = (sim: ClusterSim): void => {
      sim.bump = (p: PartitionState) => {
        p.generation++;
        sim.generation++;
        p.changedAt = sim.generation;
        sim.dirtyPartitions.add(p);
      };
      sim.touch = (p: PartitionState) => {
        sim.generation++;
        sim.dirtyPartitions.add(p);
      };
    };
    const missed = fc.sample(scenarioArb(40, 120), { numRuns: 40, seed: 7 }).filter((s) => play(s, seen, writesOnly) !== null);
    expect(seen.expiries).toBeGreaterThan(0);
    expect(missed.length).toBeGreaterThan(0);
  });

  it('creates and deletes: listed, and a reader from before a restart is sent to a whole read', () => {
    const sim = ClusterSim.create({ nodes: 4, partitions: 3, streams: 0 });
    let model = sim.topology();
    sim.createPartition('extra', 'queue', ['n1', 'n2', 'n3']);
    sim.deletePartition('q-0');
    const changes = sim.changesSince(model.generation)!;
    expect(changes.partitions.map((p) => p.id)).toEqual(['extra']);
    expect(changes.removed).toEqual(['q-0']);
    model = applyChanges(model, changes);
    expect(same(model, sim.topology())).toBeNull();
    expect(sim.changesSince(model.generation + 1)).toBeNull();
    const restarted = ClusterSim.fromSnapshot(JSON.parse(JSON.stringify(sim.snapshot())));
    expect(restarted.changesSince(model.generation - 1)).toBeNull();
    expect(restarted.changesSince(model.generation)?.partitions).toEqual([]);
  });
});
