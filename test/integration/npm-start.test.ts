/**
 * `npm start` as a user runs it: everything comes up and prints the UI's URL, a node joins the balanced cluster
 * and the rebalancer moves copies onto it, `npx rebalancer` moves a follower, Ctrl-C stops every process, and a second start still knows the move (same .data directory).
 * As a service: a start beside whatever holds one of its ports fails at once and starts nothing, SIGTERM to
 * the `npm start` process alone (not its group) stops every process it started, and none outlives a SIGKILL
 * of the start process (the dev server only where setpriv is on PATH, as on the Linux machines CI uses).
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnCluster } from '../../cluster/spawn';
import { portFree, startDevServer } from '../../scripts/dev-server';
import { ensureTemporalCli } from '../../scripts/temporal-cli';
import { temporalAddress } from './helpers';
import { alive, descendants, processesMentioning } from './processes';
import { exitWithin, expectStoppedEverything, killLeftovers, lastLine, launch, ownEnv, root, start, STOPPED, waitFor } from './start-harness';

/** Run `npm start` that must fail before it starts anything: exit code 1 within 60s, no process left. */
async function failsAtOnce(env: NodeJS.ProcessEnv & { DATA_DIR: string }): Promise<string> {
  const run = launch(env, 'npm');
  try {
    expect(await exitWithin(run.child, 60_000), `exit code:\n${run.output().slice(-3000)}`).toBe(1);
    expect(run.output()).not.toContain('Temporal dev server ready');
    expect(run.output()).not.toContain('cluster listening');
    expect(processesMentioning(env.DATA_DIR), 'processes left with its DATA_DIR').toEqual([]);
    return run.output();
  } finally {
    killLeftovers(descendants(run.child.pid!), env.DATA_DIR);
  }
}

async function interrupt(child: ChildProcess): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  child.kill('SIGINT');
  return exited;
}

function rebalancer(env: NodeJS.ProcessEnv, ...args: string[]) {
  return spawnSync(process.execPath, ['bin/rebalancer.mjs', ...args], { cwd: root, env, encoding: 'utf8', timeout: 120_000 });
}

describe('npm start', () => {
  it('runs everything, fills a node that joins, moves a follower from the CLI, stops on Ctrl-C and resumes from .data', async () => {
    const env = await ownEnv();
    const [uiPort, clusterPort, dataDir] = [Number(env.TEMPORAL_UI_PORT), Number(env.CLUSTER_PORT), env.DATA_DIR];

    let run = await start(env);
    try {
      expect(run.output()).toContain(`Temporal UI:        http://127.0.0.1:${uiPort}`);
      expect((await fetch(`http://127.0.0.1:${uiPort}/`)).status).toBe(200);

      // The demo: the cluster starts balanced, a node joins 20 s later (announced), and the loop moves copies onto
      // it. The moves that ended by the first copy's arrival all went to the new node: nothing moved before it.
      await waitFor(() => /demo: in 20 s an empty node n6 \(zone z3\) joins the cluster/.test(run.output()), 60_000, () => `no join announced: ${run.output().slice(-2000)}`);
      await waitFor(() => /demo: node n6 joined \(POST \/v1\/nodes\).*rebalancer moves follower copies onto it/.test(run.output()), 60_000, () => `n6 did not join: ${run.output().slice(-2000)}`);
      await waitFor(() => /demo: n6 holds \d+ cop(y|ies) now/.test(run.output()), 300_000, () => `no copy reached n6: ${run.output().slice(-2000)}`);
      const { ended } = JSON.parse(rebalancer(env, 'moves', '--json').stdout) as { ended: { to: string; outcome: { status: string } }[] };
      expect(ended.length).toBeGreaterThan(0);
      expect(ended.map((m) => [m.to, m.outcome.status])).toEqual(ended.map(() => ['n6', 'completed']));

      // npm start runs the rebalancer loop: paused (it stays paused across the restart) and with its moves ended,
      // it leaves q-0 to this operator move.
      expect(rebalancer(env, 'pause', '--reason', 'the test moves q-0 by hand').status).toBe(0);
      const deadline = Date.now() + 120_000;
      while ((JSON.parse(rebalancer(env, 'status', '--json').stdout) as { inFlight: unknown[] }).inFlight.length > 0) {
        if (Date.now() > deadline) throw new Error('the rebalancer loop still has moves in flight');
        await new Promise((r) => setTimeout(r, 500));
      }
      const topology = (await (await fetch(`http://127.0.0.1:${clusterPort}/v1/topology`)).json()) as { partitions: { id: string; owner: string; followers: string[] }[]; nodes: { id: string }[] };
      const q0 = topology.partitions.find((p) => p.id === 'q-0')!;
      const to = topology.nodes.find((n) => n.id !== q0.owner && !q0.followers.includes(n.id))!.id;
      const move = rebalancer(env, 'move', 'q-0', '--from', q0.followers[0]!, '--to', to, '--wait', '--json');
      expect(move.stderr).toBe('');
      expect(move.status).toBe(0);
      expect(JSON.parse(move.stdout.trim().split('\n').pop()!)).toMatchObject({ status: 'completed', from: q0.followers[0], to });
      const listed = (await (await fetch(`http://127.0.0.1:${uiPort}/api/v1/namespaces/default/workflows`)).json()) as { executions: { execution: { workflowId: string } }[] };
      expect(listed.executions.map((e) => e.execution.workflowId)).toContain('reconfigure-q-0');
    } finally {
      expect(await interrupt(run.child)).toBe(0);
    }
    expect(lastLine(run.output())).toContain(STOPPED);

    run = await start(env);
    try {
      const show = rebalancer(env, 'show', 'q-0', '--json');
      expect(show.status).toBe(0);
      expect(JSON.parse(show.stdout)).toMatchObject({ workflowId: 'reconfigure-q-0', running: false, outcome: { status: 'completed' } });
      expect(run.output(), 'a cluster that has n6 already is left as it is').not.toContain('demo: in 20 s');
      const refused = rebalancer(env, 'move', 'q-0', '--from', 'n1', '--to', 'n1');
      expect(refused.status).toBe(1);
      expect(refused.stderr).toMatch(/^refused \((same_node|not_a_follower)\): /);
    } finally {
      expect(await interrupt(run.child)).toBe(0);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 600_000);

  describe('a port another process holds: fails at once naming the port and its variable, starts nothing', () => {
    /** Each port held by what would really be there: a Temporal server, any listener, a reference cluster. */
    const holders: Record<string, () => Promise<{ port: number; release(): Promise<void> }>> = {
      TEMPORAL_PORT: async () => {
        const [host, port] = temporalAddress().split(':');
        expect(host, 'the shared dev server listens on this machine').toBe('127.0.0.1');
        return { port: Number(port), release: async () => undefined };
      },
      TEMPORAL_UI_PORT: async () => {
        const server = net.createServer();
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        return { port: (server.address() as net.AddressInfo).port, release: () => new Promise((resolve) => server.close(() => resolve())) };
      },
      CLUSTER_PORT: async () => {
        const cluster = await spawnCluster({ clock: 'stepped' });
        return { port: Number(new URL(cluster.url).port), release: () => cluster.close() };
      },
    };

    it.each(Object.keys(holders))('%s', async (variable) => {
      const holder = await holders[variable]!();
      const env = { ...(await ownEnv()), [variable]: String(holder.port) };
      try {
        const output = await failsAtOnce(env);
        expect(output).toMatch(new RegExp(`port ${holder.port} for .* is already in use: set ${variable} to a free port`));
        expect(await portFree(holder.port), 'the holder keeps its port').toBe(false);
      } finally {
        await holder.release();
        fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
      }
    });
  });

  it('the dev server start never takes another server on its port for its own', async () => {
    // No port check before it: the start itself must see that its child did not start, though the port answers.
    const port = Number(temporalAddress().split(':')[1]);
    const start = startDevServer({ executable: await ensureTemporalCli(), dbFile: null, port, uiPort: null });
    await expect(start).rejects.toThrow(/exited .* at start: .*address already in use/s);
  });

  describe('one DATA_DIR, one run', () => {
    it('a DATA_DIR another run holds: fails at once naming it and the pid, starts nothing', async () => {
      const env = await ownEnv();
      // This test's own process stands for the run that holds the directory: alive, and not us.
      const lock = path.join(env.DATA_DIR, 'npm-start.pid');
      fs.writeFileSync(lock, String(process.pid));
      try {
        const output = await failsAtOnce(env);
        expect(output).toContain(`DATA_DIR ${env.DATA_DIR} is in use by another npm start (pid ${process.pid})`);
        expect(fs.readFileSync(lock, 'utf8'), 'the holder keeps the directory').toBe(String(process.pid));
      } finally {
        fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
      }
    });

    it('a lock left by a killed run is taken over (and released at the end)', async () => {
      const env = await ownEnv();
      const gone = spawnSync(process.execPath, ['-e', '']).pid;
      expect(alive(gone)).toBe(false);
      const lock = path.join(env.DATA_DIR, 'npm-start.pid');
      fs.writeFileSync(lock, String(gone));
      // A taken port ends this run right after the lock, so taking the lock over is all it shows.
      const holder = net.createServer();
      await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
      env.CLUSTER_PORT = String((holder.address() as net.AddressInfo).port);
      try {
        const output = await failsAtOnce(env);
        expect(output).not.toContain('is in use by another npm start');
        expect(output).toContain(`port ${env.CLUSTER_PORT} for the reference cluster is already in use`);
        expect(fs.existsSync(lock), 'released when the run ended').toBe(false);
      } finally {
        holder.close();
        fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
      }
    });
  });

  it('SIGTERM to the npm start process alone stops every process it started, and says so last', async () => {
    const env = await ownEnv();
    const run = await start(env, 'npm');
    const npmPid = run.child.pid!;
    const started = descendants(npmPid);
    try {
      const servers = processesMentioning(env.DATA_DIR);
      expect(servers.length, 'the dev server and the cluster run with the DATA_DIR on their command lines').toBe(2);
      expect(started).toEqual(expect.arrayContaining(servers));

      process.kill(npmPid, 'SIGTERM');
      await expectStoppedEverything(run, started, env.DATA_DIR);
      for (const variable of ['TEMPORAL_PORT', 'TEMPORAL_UI_PORT', 'CLUSTER_PORT']) {
        expect(await portFree(Number(env[variable])), `${variable} is free again`).toBe(true);
      }
    } finally {
      killLeftovers(started, env.DATA_DIR);
      fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
    }
  });

  it('SIGTERM while it is still starting stops what has started and what is starting', async () => {
    const env = await ownEnv();
    const run = launch(env, 'node');
    let started: number[] = [];
    try {
      // The cluster is up in a second or two; the dev server and the worker take longer.
      await waitFor(() => run.output().includes('cluster listening'), 120_000, () => `no cluster: ${run.output().slice(-2000)}`);
      expect(run.output()).not.toContain('live rebalancer is running');
      started = descendants(run.child.pid!);
      run.child.kill('SIGTERM');
      await expectStoppedEverything(run, started, env.DATA_DIR);
    } finally {
      killLeftovers(started, env.DATA_DIR);
      fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
    }
  });

  it('SIGKILL of the start process: the dev server and the cluster it started exit by themselves', async () => {
    const env = await ownEnv();
    const run = await start(env);
    const started = descendants(run.child.pid!);
    try {
      expect(processesMentioning(env.DATA_DIR).length, 'the dev server and the cluster are running').toBe(2);
      run.child.kill('SIGKILL');
      await waitFor(() => started.every((pid) => !alive(pid)), 30_000, () => `still alive: ${started.filter(alive).join(', ')}`);
    } finally {
      killLeftovers(started, env.DATA_DIR);
      fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
    }
  });
});
