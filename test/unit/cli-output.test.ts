/**
 * The CLI's pure pieces: the start banner's example move, readable log lines, the plain lines of `moves --watch`
 * when stdout is not a terminal, and where `nodes` says each node stands.
 */
import { describe, expect, it } from 'vitest';
import { ClusterSim } from '../../cluster/sim/sim';
import { exampleMove } from '../../operations/moves';
import { describeNodes } from '../../client/commands/nodes';
import { describeUnder } from '../../client/commands/status';
import { watchMoves } from '../../client/watch';
import { nodeScores } from '../../operations/scores';
import { DEFAULT_PLANNER_CONFIG } from '../../planner';
import type { MoveStatus, RebalancerStatus } from '../../rules/definitions';
import { isWebpackReport, prettyLine } from '../../worker/logger';

const fresh = () => ClusterSim.create({ nodes: 5, partitions: 12, streams: 1, config: {} }).topology();

describe('the start banner example', () => {
  it('is a move the cluster as it is now accepts, also after the first example ran', () => {
    const topology = fresh();
    expect(exampleMove(topology)).toBe('rebalancer move q-0 --from n2 --to n4 --wait');
    // After that move n4 holds q-0's copy and n2 none: the old fixed example would be refused (not_a_follower).
    const q0 = topology.partitions.find((p) => p.id === 'q-0')!;
    q0.followers = ['n4', 'n3'];
    expect(exampleMove(topology)).toBe('rebalancer move q-0 --from n4 --to n2 --wait');
  });

  it('is of a partition the loop leaves alone where one is (under npm start, the loop is about to fill the demo node)', () => {
    const topology = fresh();
    expect(exampleMove(topology, new Set(['q-0', 'q-1']))).toMatch(/^rebalancer move q-2 /);
    // When the loop would touch every partition, any accepted move serves.
    expect(exampleMove(topology, new Set(topology.partitions.map((p) => p.id)))).toBe('rebalancer move q-0 --from n2 --to n4 --wait');
  });

  it('is null when no follower move would be accepted anywhere', () => {
    const full = ClusterSim.create({ nodes: 3, partitions: 2, streams: 0, config: {} }).topology();
    expect(exampleMove(full)).toBeNull();
  });
});

describe('rebalancer nodes', () => {
  it('says a node below the band receives copies, and a draining or down one receives none', () => {
    const topology = fresh();
    const row = (text: string, node: string) => text.split('\n').find((l) => l.startsWith(`${node} `))!;
    const shown = (t: typeof topology) => describeNodes(nodeScores(t, [], DEFAULT_PLANNER_CONFIG), { via: 'broker', url: 'http://127.0.0.1:7380' });
    // n5 empty: far below the band.
    for (const p of topology.partitions) for (const [i, f] of p.followers.entries()) if (f === 'n5') p.followers[i] = 'n6';
    topology.nodes.push({ ...topology.nodes.find((n) => n.id === 'n5')!, id: 'n6' });
    expect(row(shown(topology), 'n5')).toMatch(/below the band: receives$/);
    topology.nodes.find((n) => n.id === 'n5')!.draining = true;
    expect(row(shown(topology), 'n5')).toMatch(/up, draining .* draining: receives nothing$/);
    topology.nodes.find((n) => n.id === 'n5')!.live = false;
    expect(row(shown(topology), 'n5')).toMatch(/draining: receives nothing$/);
    topology.nodes.find((n) => n.id === 'n5')!.draining = false;
    expect(row(shown(topology), 'n5')).toMatch(/^n5 .* down .* down: receives nothing$/);
  });
});

describe('rebalancer status', () => {
  const lostOn = (partition: string) => ({ partition, replicationFactor: 3, liveCopies: 2, lost: [{ node: 'n4', reason: 'n4 is down with its disk lost' }], repair: null });
  const status = (lastPlan: Partial<NonNullable<RebalancerStatus['lastPlan']>>, paused = false) =>
    ({ lastPlan: { skipped: [], idleReason: null, ...lastPlan }, paused: paused ? { by: 'alice', at: 0, reason: 'upgrade' } : null, inFlight: [{}, {}], settings: { planner: { maxTransfersPerCluster: 2 } } }) as unknown as RebalancerStatus;
  const state = (lines: string[], partition: string) => lines.join('\n').split('\n').find((l) => l.startsWith(`${partition} `))!;

  it('says what holds a repair not started: the step skipped, what held it, the pause, or the transfer limit', () => {
    const under = [lostOn('q-7'), lostOn('q-8')];
    expect(state(describeUnder(under, status({ skipped: [{ partition: 'q-7', reason: 'a reconfiguration of q-7 is already running' }] })), 'q-7')).toMatch(
      /lost \(n4 is down with its disk lost\), repair not started: a reconfiguration of q-7 is already running$/,
    );
    const held = 'repair of q-8 (n4 is down with its disk lost): no node can take a new copy now (transfer limits, zones, copies already there)';
    expect(state(describeUnder(under, status({ idleReason: held })), 'q-8')).toMatch(/repair not started: repair of q-8 .*no node can take a new copy now/);
    expect(state(describeUnder(under, status({ idleReason: held })), 'q-7')).toMatch(/repair not started: it starts at a tick with a transfer slot free \(2 move\(s\) in flight, at most 2\)$/);
    expect(state(describeUnder(under, status({}, true)), 'q-7')).toMatch(/repair not started: the loop is paused$/);
  });
});

describe('readable log lines', () => {
  it('show time, level, name, message and the other fields as key=value; an error with its stack', () => {
    const time = Date.UTC(2026, 10, 30, 14, 2, 11);
    const line = JSON.stringify({ level: 30, time, pid: 1, hostname: 'h', name: 'start', url: 'http://127.0.0.1:7380', note: 'two words', msg: 'using the broker' });
    expect(prettyLine(line)).toBe('14:02:11 INFO  start: using the broker url=http://127.0.0.1:7380 note="two words"\n');
    const err = JSON.stringify({ level: 50, time, name: 'start', err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at x' }, msg: 'start failed' });
    expect(prettyLine(err)).toBe('14:02:11 ERROR start: start failed\n  Error: boom\n    at x\n');
  });

  it("the bundler's webpack report goes to debug; its errors and other runtime lines keep their level", () => {
    const report = 'asset workflow-bundle-1.js 1.2 MiB [emitted]\nruntime modules 1 KiB\nwebpack 5.104.1 compiled successfully in 812 ms';
    expect(isWebpackReport('INFO', report)).toBe(true);
    expect(isWebpackReport('ERROR', report)).toBe(false);
    expect(isWebpackReport('INFO', 'Workflow bundle created')).toBe(false);
  });
});

function status(partition: string, bytesRemaining: number | null, phase: MoveStatus['phase'] = 'catching_up'): MoveStatus {
  return {
    kind: 'follower-move',
    partition,
    from: 'n2',
    to: 'n4',
    origin: 'operator',
    phase,
    bytesRemaining,
    boundary: null,
    targetDurable: null,
    blockingReason: null,
    epoch: 1,
    generation: 1,
    retries: 0,
    outcome: null,
  };
}

describe('moves --watch without a terminal', () => {
  it('prints a line when a move changes, with the share of bytes copied, and one when it ends', async () => {
    const refreshes = [
      [],
      [status('q-1', 4096)],
      [status('q-1', 4096)],
      [status('q-1', 1024), { ...status('q-2', null, 'adding_learner'), from: null, kind: 'grow' as const }],
      [status('q-2', 0)],
    ];
    const stop = new AbortController();
    let out = '';
    let calls = 0;
    await watchMoves(
      async () => {
        const running = refreshes[calls++];
        if (!running) stop.abort();
        return running ?? [];
      },
      { everyMs: 1, signal: stop.signal, out: (t) => void (out += t) },
    );
    expect(out.trim().split('\n')).toEqual([
      'no moves in progress',
      'q-1 follower-move n2->n4 0% catching_up: 4.0 KiB remaining',
      'q-1 follower-move n2->n4 75% catching_up: 1.0 KiB remaining',
      'q-2 grow +n4 0% adding_learner',
      'q-1 ended: `rebalancer show q-1` says how',
      'q-2 follower-move n2->n4 100% catching_up: 0 B remaining',
    ]);
  });
});
