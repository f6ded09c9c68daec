/**
 * `npm start` stopped from a terminal, each way a person or a service manager stops it: Ctrl-C (SIGINT to the
 * whole process group, npm included), SIGINT or SIGTERM to the printed pid, SIGHUP (the terminal closed). Each
 * stops the worker first (its tasks drain while the dev server and the cluster still answer), then the admin
 * service, the dev server and the cluster, logs no WARN or error line, and leaves no process. A second Ctrl-C
 * while it stops kills everything at once and says so.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { alive, descendants, processesMentioning } from './processes';
import { exitWithin, expectStoppedEverything, killLeftovers, launch, ownEnv, start, waitFor } from './start-harness';

/** The lines of a run's output a person would call a warning or an error: pino's level 40 and up, or raw text. */
function complaints(output: string): string[] {
  return output.split('\n').filter((line) => {
    try {
      const entry = JSON.parse(line) as { level?: number | string };
      return typeof entry.level === 'number' ? entry.level >= 40 : /warn|error|fatal/i.test(String(entry.level));
    } catch {
      return /\b(warn|warning|error|panic)\b/i.test(line);
    }
  });
}

/** The messages of the run's own log lines, in order. */
function messages(output: string): string[] {
  return output.split('\n').flatMap((line) => {
    try {
      const entry = JSON.parse(line) as { msg?: string };
      return typeof entry.msg === 'string' ? [entry.msg] : [];
    } catch {
      return [];
    }
  });
}

/**
 * When the worker's "worker stopped" line appeared and when each server process exited, polled until the run
 * exits: a signal that reached the servers too would end them before the worker stopped.
 */
async function watchStops(run: { child: ChildProcess; output: () => string }, servers: number[]): Promise<{ workerStoppedAt: number; exitedAt: Map<number, number> }> {
  let workerStoppedAt = Infinity;
  const exitedAt = new Map<number, number>();
  while (run.child.exitCode === null && run.child.signalCode === null) {
    const now = performance.now();
    if (workerStoppedAt === Infinity && run.output().includes('"msg":"worker stopped"')) workerStoppedAt = now;
    for (const pid of servers) if (!exitedAt.has(pid) && !alive(pid)) exitedAt.set(pid, now);
    await new Promise((r) => setTimeout(r, 20));
  }
  return { workerStoppedAt, exitedAt };
}

const ORDER = ['stopping the worker', 'worker stopped', 'stopping the admin service', 'stopping the Temporal dev server', 'stopping the reference cluster', 'stopped: every process npm start ran has exited'];

describe('stopping npm start from a terminal', () => {
  const cases: { name: string; via: 'node' | 'npm'; to: 'group' | 'pid'; signal: NodeJS.Signals; whileMoving?: boolean }[] = [
    { name: 'Ctrl-C (SIGINT to the group, npm on top) while moves run', via: 'npm', to: 'group', signal: 'SIGINT', whileMoving: true },
    { name: 'SIGINT to the printed pid', via: 'node', to: 'pid', signal: 'SIGINT' },
    { name: 'SIGTERM to the printed pid', via: 'node', to: 'pid', signal: 'SIGTERM' },
    { name: 'SIGHUP to the group (the terminal closed)', via: 'node', to: 'group', signal: 'SIGHUP' },
  ];

  it.each(cases)('$name: worker first, then the rest, and not one WARN line', async ({ via, to, signal, whileMoving }) => {
    const env = await ownEnv();
    const run = await start(env, via);
    const started = descendants(run.child.pid!);
    try {
      const pid = Number(/SIGTERM to pid (\d+)/.exec(run.output())![1]);
      if (whileMoving) {
        // The demo's node joins 20 s after the start and the loop moves copies onto it: stop with moves in flight.
        await waitFor(() => /demo: node n6 joined/.test(run.output()), 120_000, () => `n6 did not join: ${run.output().slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 3_000));
      }
      const servers = processesMentioning(env.DATA_DIR);
      expect(servers.length, 'the dev server and the cluster run with the DATA_DIR on their command lines').toBe(2);
      const order = watchStops(run, servers);
      process.kill(to === 'group' ? -run.child.pid! : pid, signal);
      await expectStoppedEverything(run, started, env.DATA_DIR);
      const { workerStoppedAt, exitedAt } = await order;
      // One not seen gone by the last poll exited after it, as the run was exiting.
      for (const server of servers) expect(exitedAt.get(server) ?? Infinity, `server ${server} exited before the worker stopped`).toBeGreaterThan(workerStoppedAt);
      expect(complaints(run.output()), run.output().slice(-4000)).toEqual([]);
      const said = messages(run.output());
      const at = ORDER.map((m) => said.findIndex((s) => s.startsWith(m)));
      expect(at, `stop lines in order:\n${said.slice(-15).join('\n')}`).toEqual([...at].sort((a, b) => a - b));
      expect(at.every((i) => i >= 0), `every stop line:\n${said.slice(-15).join('\n')}`).toBe(true);
    } finally {
      killLeftovers(started, env.DATA_DIR);
      fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
    }
  }, 400_000);

  it('a second Ctrl-C while it stops kills every process at once, and says so', async () => {
    const env = await ownEnv();
    const run = launch(env, 'node');
    let started: number[] = [];
    try {
      await waitFor(() => run.output().includes('live rebalancer is running'), 180_000, () => `npm start did not come up: ${run.output().slice(-2000)}`);
      started = descendants(run.child.pid!);
      // The reference cluster, held stopped, cannot exit on its SIGTERM: the orderly stop is still under way when
      // the second Ctrl-C comes, however fast the rest of it is (it once ended within the second before it).
      const cluster = processesMentioning('cluster/main.ts').filter((p) => started.includes(p));
      expect(cluster.length, 'the reference cluster among the processes of npm start').toBeGreaterThan(0);
      for (const p of cluster) process.kill(p, 'SIGSTOP');
      process.kill(-run.child.pid!, 'SIGINT');
      await waitFor(() => run.output().includes('stopping the worker'), 30_000, () => `no stop began: ${run.output().slice(-2000)}`);
      // Past the second in which a repeat is npm forwarding the first one.
      await new Promise((r) => setTimeout(r, 1_100));
      process.kill(-run.child.pid!, 'SIGINT');
      expect(await exitWithin(run.child, 10_000), run.output().slice(-3000)).toBe(130);
      expect(run.output()).toContain('SIGINT while stopping: killing every process at once');
      await waitFor(() => started.every((p) => !alive(p)), 15_000, () => `still alive: ${started.filter(alive).join(', ')}`);
    } finally {
      killLeftovers(started, env.DATA_DIR);
      fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
    }
  }, 300_000);
});

