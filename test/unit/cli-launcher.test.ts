/**
 * bin/rebalancer.mjs runs the CLI from a bundle it builds on first use (dist/cli.mjs) and builds again when a source
 * changed, or through tsx where it cannot build. On a copy of the sources, so the checkout's own bundle is not touched.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const repo = resolve(import.meta.dirname, '../..');
const { version } = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { version: string };

describe('the rebalancer launcher', () => {
  it('builds the bundle once, builds it again when a source changes, and runs through tsx where it cannot build', () => {
    const root = mkdtempSync(join(tmpdir(), 'cli-launcher-'));
    for (const d of ['bin', 'client', 'operations', 'planner', 'rules', 'cluster', 'worker']) cpSync(join(repo, d), join(root, d), { recursive: true });
    cpSync(join(repo, 'package.json'), join(root, 'package.json'));
    symlinkSync(join(repo, 'node_modules'), join(root, 'node_modules'));
    const run = () => spawnSync(process.execPath, [join(root, 'bin/rebalancer.mjs'), '--version'], { encoding: 'utf8', timeout: 60_000 });
    const built = () => JSON.parse(readFileSync(join(root, 'dist/cli.sources.json'), 'utf8')) as { startedAt: number; inputs: string[] };
    try {
      expect(run().stdout.trim()).toBe(version);
      const first = built();
      expect(first.inputs).toEqual(expect.arrayContaining(['client/main.ts', 'planner/plan.ts', 'operations/dry-run.ts']));
      expect(run().stdout.trim()).toBe(version);
      expect(built().startedAt).toBe(first.startedAt);

      // A source edited after the build: the next command builds again and runs the edit.
      const main = join(root, 'client/main.ts');
      writeFileSync(main, `process.stderr.write('edited\\n');\n${readFileSync(main, 'utf8')}`);
      const later = new Date(first.startedAt + 1000);
      utimesSync(main, later, later);
      const edited = run();
      expect(edited.stdout.trim()).toBe(version);
      expect(edited.stderr).toContain('edited');
      expect(built().startedAt).toBeGreaterThan(first.startedAt);

      // No bundle can be written (dist is a file): the TypeScript runs through tsx.
      rmSync(join(root, 'dist'), { recursive: true });
      writeFileSync(join(root, 'dist'), '');
      const fallback = run();
      expect(fallback.stdout.trim()).toBe(version);
      expect(fallback.stderr).toContain('edited');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
