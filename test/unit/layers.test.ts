/**
 * The layer guard of eslint.config.js (issue 21): each guarded folder refuses imports of the folders above it at
 * every depth of the importing file, as a reviewer would read the path, and lets its own modules through.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ESLint, type Linter } from 'eslint';
import tseslint from 'typescript-eslint';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
// The config is plain JavaScript without types: loaded by URL, as ESLint itself loads it.
const { default: config } = (await import(pathToFileURL(path.join(root, 'eslint.config.js')).href)) as { default: Linter.Config[] };
// Only the guard's entries (the typed rules need files the TypeScript project knows): the same rules, any path.
const guards = config.filter((c) => c.rules?.['no-restricted-imports'] !== undefined);
const eslint = new ESLint({ cwd: root, overrideConfigFile: true, overrideConfig: [{ files: ['**/*.ts'], languageOptions: { parser: tseslint.parser } }, ...guards] });

async function refused(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return result!.messages.map((m) => `${m.ruleId}: ${m.message}`);
}

describe('the layer guard', () => {
  it.each([
    ['workflows/steps/x.ts', "import { relay } from '../../activities/relay';", /Workflows import only types/],
    ['workflows/legacy/x.ts', "import { ClusterClient } from '../../cluster/client';", /Workflows import only types/],
    ['workflows/x.ts', "import { planNow } from '../planner';", /Workflows import only types/],
    ['workflows/x.ts', "import fs from 'node:fs';", /Node built-ins are not available/],
    ['planner/x.ts', "import { formatBytes } from '../workflows/format';", /The planner is pure/],
    ['planner/x.ts', "import { ClusterSim } from '../cluster/sim/sim';", /The planner is pure/],
    ['cluster/main.ts', "import { runCli } from '../client/cli';", /The reference cluster imports nothing of the rebalancer/],
    ['cluster/sim/x.ts', "import { planNow } from '../../planner';", /The reference cluster imports nothing of the rebalancer/],
  ])('refuses, in %s, %s', async (file, code, message) => {
    const messages = await refused(file, code);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatch(message);
  });

  it.each([
    ['workflows/steps/x.ts', "import type { RelayActivities } from '../../activities/relay';"],
    ['workflows/steps/x.ts', "import { formatBytes } from '../format';"],
    ['planner/x.ts', "import { Topology } from '../cluster/contract';"],
    ['cluster/conformance/x.ts', "import { ClusterClient } from '../client';"],
    ['client/x.ts', "import { planNow } from '../planner';"],
  ])('lets through, in %s, %s', async (file, code) => {
    expect(await refused(file, code)).toEqual([]);
  });
});
