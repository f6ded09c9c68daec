/** Pins and exclusions as pure rules: the loop's refusals, the steps it leaves alone, and the notices and id checks clients give. */
import { describe, expect, it } from 'vitest';
import { drainNotice, pinNotice, unknownId } from '../../operations/rebalancer';
import { checkHold, operatorHold, planHolds } from '../../rules/rebalancer-rules';
import { node, partition, topology } from './planner-topology';

const alice = { by: 'alice', reason: 'investigating', at: 1 };

describe('checkHold: who, why, and the other state', () => {
  it('accepts a pin of a partition not pinned and an unpin of one pinned, likewise for nodes', () => {
    expect(checkHold('pin', 'q-1', { by: 'alice', reason: 'audit' }, {})).toBeNull();
    expect(checkHold('unpin', 'q-1', { by: 'bob', reason: 'done' }, { 'q-1': alice })).toBeNull();
    expect(checkHold('exclude', 'n3', { by: 'alice', reason: 'burn-in' }, {})).toBeNull();
    expect(checkHold('include', 'n3', { by: 'bob', reason: 'done' }, { n3: alice })).toBeNull();
  });

  it.each([
    ['a pin without a reason', 'pin', 'q-1', { by: 'alice', reason: ' ' }, {}, /^pin needs a reason: "reason" is empty/],
    ['an exclusion without who', 'exclude', 'n3', { by: '', reason: 'x' }, {}, /^exclude needs who asks: "by" is empty/],
    ['a pin without a partition', 'pin', ' ', { by: 'alice', reason: 'x' }, {}, /^pin needs a partition: "partition" is empty; expected an id, for example "q-3"$/],
    ['a pin of a pinned partition', 'pin', 'q-1', { by: 'bob', reason: 'x' }, { 'q-1': alice }, /^q-1 is already pinned by alice \(investigating\); unpin it first$/],
    ['an unpin of a partition not pinned', 'unpin', 'q-2', { by: 'bob', reason: 'x' }, { 'q-1': alice }, /^q-2 is not pinned: nothing to unpin \(pinned: q-1\)$/],
    ['an exclusion of an excluded node', 'exclude', 'n3', { by: 'bob', reason: 'x' }, { n3: alice }, /^n3 is already excluded by alice \(investigating\); include it first$/],
    ['an include of a node not excluded', 'include', 'n3', { by: 'bob', reason: 'x' }, {}, /^n3 is not excluded: nothing to include \(excluded: none\)$/],
  ] as const)('refuses %s', (_what, action, id, request, holds, message) => {
    expect(checkHold(action, id, request, holds)).toMatch(message);
  });
});

describe('the loop leaves held steps alone', () => {
  it('operatorHold names the pin or the exclusion a step runs into', () => {
    const step = { partition: 'q-1', from: 'n1', to: 'n4' };
    expect(operatorHold(step)).toBeNull();
    expect(operatorHold(step, { 'q-1': alice })).toBe('q-1 is pinned by alice: investigating');
    expect(operatorHold(step, {}, { n4: alice })).toBe('n4 is excluded by alice: investigating');
    expect(operatorHold(step, { 'q-2': alice }, { n2: alice })).toBeNull();
  });

  it('planHolds passes only holds that exist, so a plan request without any is unchanged', () => {
    expect(planHolds({})).toEqual({});
    expect(planHolds({ pinned: {}, excluded: {} })).toEqual({});
    expect(planHolds({ pinned: { 'q-1': alice }, excluded: {} })).toEqual({ pinned: { 'q-1': alice } });
  });
});

describe('what clients say', () => {
  const t = topology([node('n1'), node('n2'), node('n3')], [partition('q-1', 'n1', ['n2']), partition('q-2', 'n2', ['n3'])]);

  it('unknownId names the id, the field and what the broker has', () => {
    expect(unknownId(t, 'partition', 'q-1')).toBeNull();
    expect(unknownId(t, 'partition', 'q-9')).toBe('unknown partition q-9: the broker has 2 (q-1, q-2)');
    expect(unknownId(t, 'node', 'n9', 'to')).toBe('unknown node n9 (to): the broker has 3 (n1, n2, n3)');
  });

  it('a drain of an excluded node or one holding pinned partitions says it goes ahead, in one line', () => {
    const holds = { pinned: { 'q-1': alice }, excluded: { n2: alice } };
    expect(drainNotice(holds, t, 'n2')).toBe('note: n2 is excluded from rebalancing by alice (investigating) and holds pinned q-1: the drain moves every copy off n2 as asked');
    expect(drainNotice(holds, t, 'n1')).toBe('note: n1 holds pinned q-1: the drain moves every copy off n1 as asked');
    expect(drainNotice(holds, t, 'n3')).toBeNull();
    expect(drainNotice(null, t, 'n2')).toBeNull();
    expect(pinNotice(holds, 'q-1')).toMatch(/^note: q-1 is pinned by alice \(investigating\): the rebalancer leaves it alone, but an operator's request goes ahead$/);
    expect(pinNotice(holds, 'q-2')).toBeNull();
  });
});
