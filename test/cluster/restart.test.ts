/**
 * The real cluster process, killed with SIGKILL after a write, and once between the commit and the reply (a
 * test-only entry script, fixtures/crash-after-commit.ts, that installs the in-process afterCommit hook):
 * restarted on the same data it carries on from its database, and a retry with the same idempotency key
 * returns the first answer instead of executing again.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { ClusterClient } from '../../cluster/client';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const children: ChildProcess[] = [];
const dirs: string[] = [];

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'cluster-restart-'));
  dirs.push(d);
  return d;
}

interface Started {
  child: ChildProcess;
  url: string;
  exited: Promise<number | null>;
}

const CLUSTER = ['cluster/main.ts', '--port', '0', '--clock', 'stepped', '--partitions', '3', '--data'];
const CRASH_AFTER_COMMIT = ['test/cluster/fixtures/crash-after-commit.ts'];

/** Starts the cluster (or a test entry script taking the data directory last) and waits for its URL. */
function start(data: string, entry = CLUSTER): Promise<Started> {
  const child = spawn(process.execPath, ['--import', 'tsx', ...entry, data], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
    child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      const m = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(out);
      if (m) resolve({ child, url: m[1]!, exited });
    });
    void exited.then((code) => reject(new Error(`cluster exited (${code}) before listening: ${err || out}`)));
  });
}

async function kill9(s: Started): Promise<void> {
  s.child.kill('SIGKILL');
  await s.exited;
}

async function post(url: string, body: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, text: await res.text() };
}

describe('the cluster process across kill -9', () => {
  it('keeps an answered write, its reply, the clock and the event sequence', async () => {
    const data = tempDir();
    const first = await start(data);
    const client = new ClusterClient(first.url);
    const write = { expectedGeneration: 1, idempotencyKey: 'move-q-0-add', node: 'n4' };
    const r1 = await post(`${first.url}/v1/partitions/q-0/add-learner`, write);
    expect(r1.status).toBe(200);
    await client.advance(1_500);
    const events = await client.events(0);
    await kill9(first);

    const second = await start(data);
    const again = new ClusterClient(second.url);
    expect(await again.clock()).toEqual({ mode: 'stepped', now: 1_500 });
    const r2 = await post(`${second.url}/v1/partitions/q-0/add-learner`, write);
    expect(r2).toEqual(r1);
    const q0 = await again.partition('q-0');
    expect(q0.partition).toMatchObject({ learners: ['n4'], generation: 2 });
    expect((await again.events(0)).events).toEqual(events.events);
    await again.advance(100);
    const later = await again.events(events.cursor);
    expect(later.events.length).toBeGreaterThan(0);
    expect(later.events[0]!.seq).toBeGreaterThan(events.cursor);
    const conflict = await post(`${second.url}/v1/partitions/q-0/add-learner`, { ...write, node: 'n5' });
    expect(conflict.status).toBe(422);
    await kill9(second);
  });

  it('answers the retry with the committed reply when it died between commit and reply', async () => {
    const data = tempDir();
    const first = await start(data, CRASH_AFTER_COMMIT);
    const write = { expectedGeneration: 1, idempotencyKey: 'lost-reply', node: 'n4' };
    await expect(post(`${first.url}/v1/partitions/q-0/add-learner`, write)).rejects.toThrow();
    expect(await first.exited).toBe(137);

    const second = await start(data);
    const retry = await post(`${second.url}/v1/partitions/q-0/add-learner`, write);
    expect(retry.status).toBe(200);
    const reply = JSON.parse(retry.text) as { ok: boolean; partition: { learners: string[]; generation: number } };
    expect(reply).toMatchObject({ ok: true, partition: { learners: ['n4'], generation: 2 } });
    // Not executed twice: a second execution would have been refused (generation 2, learner in flight).
    const view = await new ClusterClient(second.url).partition('q-0');
    expect(view.partition.generation).toBe(2);
    await kill9(second);
  });
});
