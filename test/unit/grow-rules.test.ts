import { describe, expect, it } from 'vitest';
import type { Node, Partition } from '../../cluster/contract';
import { checkGrow, checkReplace } from '../../rules/grow-rules';

const node = (id: string, over: Partial<Node> = {}): Node => ({
  id, processId: `${id}-p1`, storageInstance: `${id}-s1`, live: true, downSince: null, capacity: 1, zone: 'z1', publishRate: 0, deliveryRate: 0, draining: false, ...over,
});
/** n1-n4 live, n5 down, n6 draining, all in one zone. */
const nodes = [node('n1'), node('n2'), node('n3'), node('n4'), node('n5', { live: false }), node('n6', { draining: true })];
const partition = (over: Partial<Partition> = {}): Partition => ({
  id: 'q-0', kind: 'queue', owner: 'n1', followers: ['n2', 'n3'], learners: [], leaving: null, epoch: 1, generation: 1,
  replicationFactor: 3, durability: { mode: 'majority_durable' }, writeRequirement: 2, history: [], pendingRecovery: null,
  admission: 'open', boundary: null, retainedCopies: [], historyBytes: 0, publishRate: 0, deliveryRate: 0, ...over,
});
/** One copy per zone today: n1 (za), n2 (zb), n3 (zc); n4 in za, n7 in zd, n8 in zd but down. */
const zoned = [
  node('n1', { zone: 'za' }), node('n2', { zone: 'zb' }), node('n3', { zone: 'zc' }), node('n4', { zone: 'za' }),
  node('n7', { zone: 'zd' }), node('n8', { zone: 'ze', live: false }),
];

type Case = [string, MoveCheck, string, RegExp];
type MoveCheck = ReturnType<typeof checkGrow>;
function expectRefused([, result, code, message]: Case): void {
  expect(result.ok).toBe(false);
  if (!result.ok) {
    expect(result.code).toBe(code);
    expect(result.message).toMatch(message);
  }
}

describe('checkGrow', () => {
  it('accepts a live node without a copy when enough live nodes remain', () => {
    expect(checkGrow(partition(), nodes, 'n4')).toEqual({ ok: true });
  });
  it('accepts a node in a zone the partition has no copy in, when copies keep one per zone', () => {
    expect(checkGrow(partition(), zoned, 'n7')).toEqual({ ok: true });
  });
  it('places by node alone when copies already share a zone', () => {
    const twoZones = [node('n1', { zone: 'za' }), node('n2', { zone: 'za' }), node('n3', { zone: 'zb' }), node('n4', { zone: 'zb' })];
    expect(checkGrow(partition(), twoZones, 'n4')).toEqual({ ok: true });
  });
  it.each<Case>([
    ['a stream', checkGrow(partition({ kind: 'stream' }), nodes, 'n4'), 'not_a_queue', /q-0 is a stream/],
    ['an unknown node', checkGrow(partition(), nodes, 'n9'), 'unknown_node', /n9 is not in the cluster/],
    ['a node holding a copy', checkGrow(partition(), nodes, 'n3'), 'already_a_replica', /n3 already holds a copy/],
    ['a learner', checkGrow(partition({ learners: ['n4'] }), nodes, 'n4'), 'already_a_replica', /n4 already holds a copy/],
    ['a down node', checkGrow(partition(), nodes, 'n5'), 'node_down', /n5 is down/],
    ['a draining node', checkGrow(partition(), nodes, 'n6'), 'node_draining', /n6 is draining/],
    [
      'above the live nodes',
      checkGrow(partition({ followers: ['n2', 'n3', 'n5'], replicationFactor: 4 }), nodes.filter((n) => n.id !== 'n6'), 'n4'),
      'too_few_nodes',
      /replication factor 5 for q-0 needs 5 live nodes, one per copy; the cluster has 4 \(n1, n2, n3, n4\)/,
    ],
    ['above the maximum', checkGrow(partition({ replicationFactor: 16 }), nodes, 'n4'), 'above_maximum', /at most 16/],
    [
      'a node in a zone with more copies than another that can take one',
      checkGrow(partition(), zoned, 'n4'),
      'same_zone',
      /^q-0 has 1 copy in za, where n4 is, and 0 in zd: a copy in za would spread its copies over zones less evenly; choose a live node in zd$/,
    ],
    // Executions from before patch zone-spread keep one copy per zone.
    [
      'above the live zones, under the rule before zone-spread',
      checkGrow(partition(), zoned.filter((n) => n.id !== 'n7'), 'n4', false),
      'too_few_zones',
      /keeps one copy per zone \(za, zb, zc\); replication factor 4 needs 4 zones with a live node, the cluster has 3/,
    ],
    ['a node in a zone that has a copy, under the rule before zone-spread', checkGrow(partition(), zoned, 'n4', false), 'same_zone', /already has one in za, where n4 is/],
  ])('refuses %s', (...c) => expectRefused(c));
  it('keeps a spread it cannot narrow: two copies in one zone and none in another may take a third in the middle one', () => {
    const twoZones = [node('n1', { zone: 'za' }), node('n2', { zone: 'za' }), node('n3', { zone: 'zb' }), node('n4', { zone: 'zb' }), node('n5', { zone: 'zc' }), node('n6', { zone: 'za' })];
    const bunched = partition({ owner: 'n1', followers: ['n2', 'n3'] });
    expect(checkGrow(bunched, twoZones, 'n4')).toEqual({ ok: true });
    expect(checkGrow(bunched, twoZones, 'n5')).toEqual({ ok: true });
    expect(checkGrow(bunched, twoZones, 'n6')).toMatchObject({ ok: false, code: 'same_zone', message: expect.stringMatching(/has 2 copies in za, where n6 is, and 0 in zc/) });
  });
  it('accepts more copies than zones: each new one in a zone with the fewest (5 copies over 3 zones: 2, 2, 1)', () => {
    const three = [node('n1', { zone: 'za' }), node('n2', { zone: 'zb' }), node('n3', { zone: 'zc' }), node('n4', { zone: 'za' }), node('n5', { zone: 'zb' }), node('n6', { zone: 'zc' })];
    expect(checkGrow(partition(), three, 'n4')).toEqual({ ok: true });
    const four = partition({ followers: ['n2', 'n3', 'n4'], replicationFactor: 4 });
    expect(checkGrow(four, three, 'n5')).toEqual({ ok: true });
    expect(checkGrow(four, three, 'n6')).toEqual({ ok: true });
    const five = partition({ followers: ['n2', 'n3', 'n4', 'n5'], replicationFactor: 5 });
    expect(checkGrow(five, three, 'n6')).toEqual({ ok: true });
  });
});

describe('checkReplace', () => {
  const down = nodes.map((n) => (n.id === 'n3' ? { ...n, live: false } : n));
  it('accepts a follower whose node is down, replaced by a live node without a copy', () => {
    expect(checkReplace(partition(), down, 'n3', 'n4')).toEqual({ ok: true });
  });
  it('accepts a suspended follower on a down node', () => {
    const history = [{ node: 'n3', processId: 'n3-p1', storageInstance: 'n3-s1', suspended: true }];
    expect(checkReplace(partition({ history }), down, 'n3', 'n4')).toEqual({ ok: true });
  });
  it('accepts T in the lost copy\'s own zone when copies keep one per zone', () => {
    const lostZoned = zoned.map((n) => (n.id === 'n3' ? { ...n, live: false } : n.id === 'n4' ? { ...n, zone: 'zc' } : n));
    expect(checkReplace(partition(), lostZoned, 'n3', 'n4')).toEqual({ ok: true });
  });
  const suspendedLive = [{ node: 'n2', processId: 'n2-p2', storageInstance: 'n2-s1', suspended: true }];
  it.each<Case>([
    ['a stream', checkReplace(partition({ kind: 'stream' }), down, 'n3', 'n4'), 'not_a_queue', /q-0 is a stream/],
    ['L == T', checkReplace(partition(), down, 'n3', 'n3'), 'same_node', /both n3/],
    ['an unknown node', checkReplace(partition(), down, 'n3', 'n9'), 'unknown_node', /n9 is not in the cluster/],
    ['the owner', checkReplace(partition(), down, 'n1', 'n4'), 'not_lost', /n1 owns q-0: a lost owner is the broker's recovery/],
    ['a learner', checkReplace(partition({ learners: ['n5'] }), down, 'n5', 'n4'), 'not_lost', /n5 is a learner/],
    ['the leaving replica', checkReplace(partition({ leaving: 'n5' }), down, 'n5', 'n4'), 'not_lost', /n5 is leaving/],
    ['a node without a copy', checkReplace(partition(), down, 'n5', 'n4'), 'not_lost', /n5 is not a replica of q-0/],
    ['a follower on a live node', checkReplace(partition(), down, 'n2', 'n4'), 'not_lost', /n2 is a follower of q-0 on a live node: its copy is not lost/],
    [
      'a suspended follower on a live node',
      checkReplace(partition({ history: suspendedLive }), down, 'n2', 'n4'),
      'not_lost',
      /n2 is a suspended follower of q-0 on a live node: it rejoins by itself/,
    ],
    ['T holding a copy', checkReplace(partition(), down, 'n3', 'n2'), 'already_a_replica', /n2 already holds a copy/],
    ['T down', checkReplace(partition(), down, 'n3', 'n5'), 'node_down', /n5 is down/],
    ['T draining', checkReplace(partition(), down, 'n3', 'n6'), 'node_draining', /n6 is draining/],
    [
      'T in a zone holding more of the remaining copies than another that can take one',
      checkReplace(partition(), zoned.map((n) => (n.id === 'n3' ? { ...n, live: false } : n)), 'n3', 'n4'),
      'same_zone',
      /^q-0 has 1 copy in za, where n4 is, and 0 in zd: .*choose a live node in zd$/,
    ],
    [
      'T in a zone a remaining copy uses, under the rule before zone-spread',
      checkReplace(partition(), zoned.map((n) => (n.id === 'n3' ? { ...n, live: false } : n)), 'n3', 'n4', false),
      'same_zone',
      /already has one in za, where n4 is; choose a live node in zc or a zone it has no copy in/,
    ],
  ])('refuses %s', (...c) => expectRefused(c));
});
