/**
 * `npm start` as a user runs it: everything comes up and prints the UI's URL, `npx rebalancer` moves a
 * follower, Ctrl-C stops every process, and a second start still knows the move (same .data directory).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/dev-server';

const root = path.resolve(import.meta.dirname, '../..');

async function start(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const deadline = Date.now() + 120_000;
  while (!out.includes('live rebalancer is running')) {
    if (child.exitCode !== null) throw new Error(`npm start exited with ${child.exitCode}: ${out.slice(-2000)}`);
    if (Date.now() > deadline) throw new Error(`npm start did not come up: ${out.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { child, output: () => out };
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
  it('runs everything, moves a follower from the CLI, stops on Ctrl-C and resumes from .data', async () => {
    const [temporalPort, uiPort, clusterPort] = [await freePort(), await freePort(), await freePort()];
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rebalancer-start-'));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      TEMPORAL_PORT: String(temporalPort),
      TEMPORAL_UI_PORT: String(uiPort),
      CLUSTER_PORT: String(clusterPort),
      DATA_DIR: dataDir,
      TEMPORAL_TASK_QUEUE: 'npm-start-test',
      LOG_LEVEL: 'info',
    };
    delete env.TEMPORAL_ADDRESS;
    delete env.CLUSTER_URL;

    let run = await start(env);
    try {
      expect(run.output()).toContain(`Temporal UI:        http://127.0.0.1:${uiPort}`);
      expect((await fetch(`http://127.0.0.1:${uiPort}/`)).status).toBe(200);

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
    expect(run.output()).toContain('"msg":"stopped"');

    run = await start(env);
    try {
      const show = rebalancer(env, 'show', 'q-0', '--json');
      expect(show.status).toBe(0);
      expect(JSON.parse(show.stdout)).toMatchObject({ workflowId: 'reconfigure-q-0', running: false, outcome: { status: 'completed' } });
      const refused = rebalancer(env, 'move', 'q-0', '--from', 'n1', '--to', 'n1');
      expect(refused.status).toBe(1);
      expect(refused.stderr).toMatch(/^refused \((same_node|not_a_follower)\): /);
    } finally {
      expect(await interrupt(run.child)).toBe(0);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
