/**
 * What is derived of the model's lists (cluster/derived.ts) and carried from list to list: after any run of changes
 * reads and pages, the records not at rest are those a pass over every record finds, the moves in flight and the
 * recovery pause read from them are what a pass over every record gives, and so are the records changed since any
 * earlier list.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Partition, Topology, TopologyPage } from '../../cluster/contract';
import { atRest, notAtRest, seal } from '../../cluster/derived';
import { applyChanges, withPage } from '../../cluster/model';
import { changedBetween } from '../../operations/unlisted';
import { inFlightMoves, recoveryPending } from '../../rules/rebalancer-rules';
import type { TrackedMove } from '../../rules/definitions';
import { node, partition, topology } from './planner-topology';

const IDS = Array.from({ length: 12 }, (_, i) => `q-${String(i).padStart(2, '0')}`);

/** A record's state: which of the ways a record is not at rest it has, and its advisory figure. */
const state = fc.record({ learner: fc.boolean(), leaving: fc.boolean(), closed: fc.boolean(), recovery: fc.boolean(), bytes: fc.nat(3) });
type State = typeof state extends fc.Arbitrary<infer S> ? S : never;

function record(id: string, s: State, generation: number): Partition {
  return partition(id, 'n0', ['n1', 'n2'], {
    generation,
    learners: s.learner ? ['n3'] : [],
    leaving: s.leaving ? 'n2' : null,
    admission: s.closed ? 'closed' : 'open',
    pendingRecovery: s.recovery ? { epoch: 1, openedAt: 0, reason: 'owner lost', failedOwner: 'n0' } : null,
    historyBytes: s.bytes,
  });
}

/** A changes read (the records of `ids` in new states) or a page (the records of a range as the broker has them). */
const step = fc.oneof(
  fc.record({ kind: fc.constant('changes' as const), changed: fc.array(fc.tuple(fc.constantFrom(...IDS), state), { maxLength: 4 }) }),
  // A page's record has drifted (its assignment differs from the model's) or differs in its figures only.
  fc.record({ kind: fc.constant('page' as const), from: fc.nat(IDS.length - 1), states: fc.array(fc.tuple(state, fc.boolean()), { minLength: 1, maxLength: 6 }) }),
);

const tracked = (ids: string[]): TrackedMove[] =>
  ids.map((partition, i) => ({ partition, op: 'follower_move', from: 'n2', to: 'n3', workflowId: `w${i}`, runId: `r${i}`, startedAt: 0, bytes: 100, reason: 'test' }) as TrackedMove);

describe('records not at rest, carried from list to list', () => {
  it('are what a pass over every record finds, after any run of changes reads and pages', () => {
    fc.assert(
      fc.property(fc.array(state, { minLength: IDS.length, maxLength: IDS.length }), fc.array(step, { maxLength: 12 }), fc.subarray(IDS), (first, steps, trackedIds) => {
        let model: Topology = topology([node('n0'), node('n1'), node('n2'), node('n3')], IDS.map((id, i) => record(id, first[i]!, 1)));
        let generation = 1;
        const seen: Topology[] = [];
        const check = () => {
          // What changed since each earlier topology, from the ids carried between them, as a pass over every record says.
          for (const before of seen) expect(changedBetween(before, model)).toEqual(changedBetween({ ...before, partitions: [...before.partitions] }, model));
          seen.push(model);
          seal(model.partitions);
          expect(notAtRest(model.partitions)).toEqual(model.partitions.filter((p) => !atRest(p)));
          expect(notAtRest([...model.partitions])).toBeNull();
          // The rules over those records and the tracked moves', as over every record.
          const records = notAtRest(model.partitions, trackedIds)!;
          expect(records).toEqual(model.partitions.filter((p) => !atRest(p) || trackedIds.includes(p.id)));
          expect(inFlightMoves(records, tracked(trackedIds), [])).toEqual(inFlightMoves(model.partitions, tracked(trackedIds), []));
          expect(recoveryPending(records)).toEqual(recoveryPending(model.partitions));
        };
        check();
        for (const s of steps) {
          generation += 1;
          if (s.kind === 'changes') {
            const partitions = s.changed.map(([id, st]) => record(id, st, generation));
            model = applyChanges(model, { contractVersion: '1', generation, now: 0, nodes: model.nodes, partitions, removed: [] });
          } else {
            const ids = IDS.slice(s.from, s.from + s.states.length);
            const held = new Map(model.partitions.map((p) => [p.id, p]));
            const partitions = ids.map((id, i) => {
              const [st, drifted] = s.states[i]!;
              return drifted ? record(id, st, generation) : { ...held.get(id)!, historyBytes: st.bytes + 10 };
            });
            const page: TopologyPage = { contractVersion: '1', generation, now: 0, nodes: model.nodes, partitions, next: ids.at(-1)! };
            model = withPage(model, page, s.from === 0 ? null : IDS[s.from - 1]!, new Set()).topology;
          }
          check();
        }
      }),
      { numRuns: 300, seed: 11 },
    );
  });
});
