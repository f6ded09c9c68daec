/**
 * `rebalancer moves` with a move whose workflow does not answer its status query: the command answers within its
 * --wait and lists that move as visibility shows it, instead of waiting for the slowest of a busy worker's moves.
 */
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { register } from '../../client/commands/moves';
import type { CommandDeps } from '../../client/output';
import { KindKey, PartitionKey, PhaseKey, SourceKey, TargetKey } from '../../rules/search-attributes';

const attrs = (partition: string, phase: string) => {
  const values = new Map<unknown, string>([
    [PartitionKey, partition],
    [KindKey, 'follower-move'],
    [PhaseKey, phase],
    [SourceKey, 'n1'],
    [TargetKey, 'n4'],
  ]);
  return { get: (key: unknown) => values.get(key) };
};

/** Status queries each workflow has been asked; q-1 answers its first `q1Answers`, q-2 never answers. */
const asked: Record<string, number> = {};
let q1Answers = Infinity;

/** Visibility lists q-1 and q-2 in progress; q-1 answers its status query, q-2 never does. No move has ended. */
const client = {
  workflow: {
    list: ({ query }: { query: string }) =>
      (async function* () {
        if (!query.includes('"Running"') || query.includes('!=')) return;
        yield { workflowId: 'reconfigure-q-1', typedSearchAttributes: attrs('q-1', 'catching_up') };
        yield { workflowId: 'reconfigure-q-2', typedSearchAttributes: attrs('q-2', 'validating') };
      })(),
    getHandle: (workflowId: string) => ({
      query: () =>
        workflowId === 'reconfigure-q-1' && (asked[workflowId] = (asked[workflowId] ?? 0) + 1) <= q1Answers
          ? Promise.resolve({ partition: 'q-1', kind: 'follower-move', from: 'n1', to: 'n4', phase: 'catching_up', bytesRemaining: 2048, boundary: 17, blockingReason: null })
          : new Promise<never>(() => undefined),
    }),
  },
};

async function moves(...argv: string[]): Promise<{ out: string; ms: number }> {
  return run(undefined, ...argv);
}

async function run(signal: AbortSignal | undefined, ...argv: string[]): Promise<{ out: string; ms: number }> {
  let out = '';
  const deps: CommandDeps = {
    io: { out: (t) => (out += t), err: () => undefined, ...(signal ? { signal } : {}) },
    result: { exitCode: 0 },
    connect: () => Promise.resolve({ client, taskQueue: 'rebalancer', close: () => Promise.resolve() } as unknown as Awaited<ReturnType<CommandDeps['connect']>>),
  };
  const program = new Command().exitOverride();
  register(program, deps);
  const started = Date.now();
  await program.parseAsync(['moves', ...argv], { from: 'user' });
  return { out, ms: Date.now() - started };
}

describe('rebalancer moves with a move that does not answer', () => {
  // An `npm start` on this machine serves the admin API for the same broker and task queue at the default address: the
  // command would list its moves instead of these.
  const admin = process.env.ADMIN_URL;
  beforeAll(() => {
    process.env.ADMIN_URL = 'http://127.0.0.1:9';
  });
  afterAll(() => {
    if (admin === undefined) delete process.env.ADMIN_URL;
    else process.env.ADMIN_URL = admin;
  });

  it('answers within --wait and lists that move in `late` with --json', async () => {
    const { out, ms } = await moves('--json', '--wait', '1');
    expect(ms).toBeLessThan(3_000);
    const parsed = JSON.parse(out) as { running: { partition: string }[]; late: { partition: string; phase: string }[]; ended: unknown[] };
    expect(parsed.running.map((m) => m.partition)).toEqual(['q-1']);
    expect(parsed.late).toMatchObject([{ partition: 'q-2', phase: 'validating', from: 'n1', to: 'n4' }]);
    expect(parsed.ended).toEqual([]);
  }, 10_000);

  it('shows both in the table, the late one with its phase from visibility and what it lacks', async () => {
    const { out } = await moves();
    expect(out).toMatch(/q-1 +follower-move +n1->n4 +catching_up +2\.0 KiB +17 +-/);
    expect(out).toMatch(/q-2 +follower-move +n1->n4 +validating +\? +\? +\(no status within 1 s: phase as visibility lists it\)/);
  }, 10_000);

  it('--watch keeps a move that stops answering on its last answer, not as ended, and shows none it never heard from', async () => {
    q1Answers = 1;
    asked['reconfigure-q-1'] = 0;
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 4_500);
    const { out } = await run(stop.signal, '--watch', '--every', '1', '--wait', '1');
    q1Answers = Infinity;
    expect(asked['reconfigure-q-1']).toBeGreaterThanOrEqual(2);
    expect(out).toMatch(/q-1/);
    expect(out).not.toMatch(/q-1 ended/);
    expect(out).not.toMatch(/q-2/);
  }, 10_000);
});
