/**
 * Finds or builds the Temporal CLI (which carries the dev server). No npm package ships it and nothing may
 * be downloaded at run time except through package registries, so the project builds it once with the Go
 * module proxy, keeps it in a per-user cache (CI clones afresh each time on the same machine) and links it
 * into .tools/bin.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const TEMPORAL_CLI_VERSION = 'v1.5.1';
const MODULE = `github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION}`;

export const PROJECT_ROOT = path.resolve(import.meta.dirname, '..');

export function onPath(command: string): string | undefined {
  const found = spawnSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' });
  const out = found.stdout.trim();
  return found.status === 0 && out ? out : undefined;
}

function cacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'live-rebalancer', `temporal-${TEMPORAL_CLI_VERSION}`);
}

function linkIntoTools(binary: string): string {
  const toolsBin = path.join(PROJECT_ROOT, '.tools', 'bin');
  const link = path.join(toolsBin, 'temporal');
  fs.mkdirSync(toolsBin, { recursive: true });
  if (fs.existsSync(link) && fs.realpathSync(link) === fs.realpathSync(binary)) return link;
  fs.rmSync(link, { force: true });
  fs.symlinkSync(binary, link);
  return link;
}

/** Build with `go install`, printing progress, into the cache. */
async function build(log: (line: string) => void, signal?: AbortSignal): Promise<string> {
  const go = onPath('go');
  if (!go) {
    throw new Error(
      'The Temporal CLI is needed to run a local Temporal dev server, and neither `temporal` nor `go` is on PATH. ' +
        `Install Go (https://go.dev/doc/install) so the project can build it (go install ${MODULE}), ` +
        'or install the Temporal CLI yourself and put `temporal` on PATH, ' +
        'or set TEMPORAL_ADDRESS to an existing Temporal server.',
    );
  }
  const dir = cacheDir();
  fs.mkdirSync(dir, { recursive: true });
  log(`building the Temporal CLI ${TEMPORAL_CLI_VERSION} with Go into ${dir} (first time only: several minutes)`);
  const started = Date.now();
  let packages = 0;
  let lastLine = '';
  const child = spawn(go, ['install', '-v', MODULE], {
    env: { ...process.env, GOBIN: dir },
    stdio: ['ignore', 'pipe', 'pipe'],
    signal,
  });
  // An abort kills the build; its exit code below reports the failure.
  child.on('error', (err) => (lastLine = err.message));
  const onData = (chunk: Buffer): void => {
    for (const line of chunk.toString().split('\n')) {
      if (!line.trim()) continue;
      lastLine = line.trim();
      if (!line.startsWith('go: downloading')) packages += 1;
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const timer = setInterval(() => {
    const secs = Math.round((Date.now() - started) / 1000);
    log(`  still building the Temporal CLI: ${secs}s, ${packages} packages compiled (last: ${lastLine})`);
  }, 15_000);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearInterval(timer);
  const binary = path.join(dir, 'temporal');
  if (code !== 0 || !fs.existsSync(binary)) {
    throw new Error(`go install ${MODULE} failed (exit ${code}); last output: ${lastLine}`);
  }
  log(`built the Temporal CLI in ${Math.round((Date.now() - started) / 1000)}s`);
  return binary;
}

/** Path of a `temporal` executable: on PATH, in .tools/bin, in the cache, or built now (stopped by `signal`). */
export async function ensureTemporalCli(log: (line: string) => void = (l) => console.error(l), signal?: AbortSignal): Promise<string> {
  const existing = onPath('temporal');
  if (existing) return existing;
  const tools = path.join(PROJECT_ROOT, '.tools', 'bin', 'temporal');
  if (fs.existsSync(tools)) return tools;
  const cached = path.join(cacheDir(), 'temporal');
  if (fs.existsSync(cached)) return linkIntoTools(cached);
  return linkIntoTools(await build(log, signal));
}
