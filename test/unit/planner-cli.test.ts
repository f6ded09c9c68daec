import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runCli } from '../../client/cli';
import { partition, ring, topology, node } from './planner-topology';

const dir = mkdtempSync(path.join(tmpdir(), 'plan-cli-'));

function file(name: string, body: unknown): string {
  const f = path.join(dir, name);
  writeFileSync(f, typeof body === 'string' ? body : JSON.stringify(body));
  return f;
}

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (t) => (out += t), err: (t) => (err += t) });
  return { code, out, err };
}

describe('rebalancer plan --snapshot', () => {
  it('prints the plan to convergence as JSON: steps with op, partition, from, to, bytes, reason', async () => {
    const r = await run('plan', '--json', '--snapshot', file('join.json', ring(4, 1, 10)));
    expect(r.code).toBe(0);
    const plan = JSON.parse(r.out) as Record<string, unknown> & { steps: Record<string, unknown>[] };
    expect(plan.steps.length).toBeGreaterThan(0);
    expect(Object.keys(plan.steps[0]!).sort()).toEqual(['bytes', 'from', 'op', 'partition', 'reason', 'to']);
    for (const k of ['planningMs', 'spreadBefore', 'spreadAfter', 'predictedMs', 'startNow']) expect(typeof plan[k]).toBe('number');
    expect(plan.spreadAfter as number).toBeLessThan(plan.spreadBefore as number);
  });

  it('prints a table without --json', async () => {
    const r = await run('plan', '--snapshot', file('join2.json', ring(4, 1, 10)));
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/spread 1\.000 -> 0\.\d+/);
    expect(r.out).toMatch(/follower_move\s+q-\d+\s+n\d\s+n4/);
  });

  it.each([
    ['not JSON', '{', /not JSON/],
    ['not a topology', { nodes: [] }, /contractVersion: .*expected the body of GET \/v1\/topology/],
    ['a follower on an unknown node', topology([node('n0'), node('n1')], [partition('q-0', 'n0', ['n9'])]), /partition q-0: follower n9 is not a listed node/],
    ['the owner as its own follower', topology([node('n0'), node('n1')], [partition('q-0', 'n0', ['n0'])]), /partition q-0: the owner n0 is also listed as a follower/],
    ['a duplicate copy', topology([node('n0'), node('n1')], [partition('q-0', 'n0', ['n1'], { learners: ['n1'] })]), /n1 holds two copies \(follower and learner\)/],
    ['a learner also leaving', topology([node('n0'), node('n1'), node('n2')], [partition('q-0', 'n0', ['n2'], { learners: ['n1'], leaving: 'n1' })]), /n1 holds two copies \(learner and leaving replica\)/],
    ['a leaving replica on an unknown node', topology([node('n0'), node('n1')], [partition('q-0', 'n0', ['n1'], { leaving: 'n7' })]), /partition q-0: leaving replica n7 is not a listed node/],
  ])('refuses %s with the first problem, exit 2, changing nothing', async (_what, body, message) => {
    const r = await run('plan', '--json', '--snapshot', file(`bad-${_what.replace(/\W/g, '')}.json`, body));
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(JSON.parse(r.out)).toMatchObject({ ok: false, code: 'bad_usage' });
  });

  it('does not load the Temporal client, which takes about 0.3 s and a saved topology does not need', () => {
    const f = file('no-temporal.json', ring(4, 1, 10));
    const script = `
      import { createRequire } from 'node:module';
      const { runCli } = await import('./client/cli.ts');
      const code = await runCli(['plan', '--json', '--snapshot', ${JSON.stringify(f)}], { out: () => {}, err: (t) => process.stderr.write(t) });
      const loaded = Object.keys(createRequire(import.meta.url).cache).filter((m) => m.includes('/@temporalio/client/'));
      console.log(JSON.stringify({ code, loaded: loaded.length }));`;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: path.resolve(import.meta.dirname, '../..'), encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({ code: 0, loaded: 0 });
  });

  it('prints the whole of a --json plan longer than a pipe holds (64 KiB) before it exits', () => {
    const f = file('long.json', ring(100, 10, 10));
    // The reader waits until the command has exited (2 s at most: a command that waits for the pipe never does), so
    // the pipe is full when the plan is printed and what did not fit is still in the process.
    const ended = path.join(dir, 'long.ended');
    const command = `("${process.execPath}" bin/rebalancer.mjs plan --json --snapshot "${f}"; touch "${ended}") | (i=0; while [ ! -e "${ended}" ] && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done; cat)`;
    const run = spawnSync('sh', ['-c', command], { cwd: path.resolve(import.meta.dirname, '../..'), encoding: 'utf8' });
    expect(run.stdout.length).toBeGreaterThan(64 * 1024);
    expect((JSON.parse(run.stdout) as { steps: unknown[] }).steps.length).toBeGreaterThan(0);
  });

  it('refuses a file it cannot read, naming it', async () => {
    const r = await run('plan', '--snapshot', path.join(dir, 'missing.json'));
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/invalid --snapshot ".*missing.json": cannot read it/);
  });

  describe('uses the loop\'s settings (REBALANCER_*), not the defaults', () => {
    afterEach(() => vi.unstubAllEnvs());

    it('a transfer limit from the environment changes what starts now', async () => {
      const f = file('limits.json', ring(4, 1, 10));
      const plan = async (): Promise<{ startNow: number; threshold: number }> => JSON.parse((await run('plan', '--json', '--snapshot', f)).out);
      const before = await plan();
      vi.stubEnv('REBALANCER_MAX_TRANSFERS_PER_NODE', '1');
      vi.stubEnv('REBALANCER_THRESHOLD', '0.3');
      const after = await plan();
      expect(before.startNow).toBe(2);
      expect(after.startNow).toBe(1);
      expect(after.threshold).toBe(0.3);
    });

    it('refuses a bad setting, naming the variable, exit 2', async () => {
      vi.stubEnv('REBALANCER_THRESHOLD', '-1');
      const r = await run('plan', '--snapshot', file('bad-env.json', ring(4, 1, 10)));
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/REBALANCER_THRESHOLD/);
    });
  });
});
