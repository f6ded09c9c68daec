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
    ['workflows/steps/x.ts', "import { ClusterClient } from '../../cluster/client';", /Workflows import only types/],
    ['workflows/x.ts', "import { planNow } from '../planner';", /Workflows import only types/],
    ['workflows/x.ts', "import fs from 'node:fs';", /Node built-ins are not available/],
    ['planner/x.ts', "import { formatBytes } from '../workflows/format';", /The planner is pure/],
    ['planner/x.ts', "import { ClusterSim } from '../cluster/sim/sim';", /The planner is pure/],
    ['cluster/main.ts', "import { runCli } from '../client/cli';", /The reference cluster imports nothing of the rebalancer/],
    ['cluster/sim/x.ts', "import { planNow } from '../../planner';", /The reference cluster imports nothing of the rebalancer/],
    ['cluster/x.ts', "import { WORKFLOW_TYPE } from '../rules/definitions';", /The reference cluster imports nothing of the rebalancer/],
    ['planner/x.ts', "import type { MoveStatus } from '../rules/definitions';", /The planner is pure/],
    ['rules/x.ts', "import { startFollowerMove } from '../operations/moves';", /rules\/ imports nothing of the folders above it/],
    ['rules/x.ts', "import type { Activities } from '../activities';", /rules\/ imports nothing of the folders above it/],
    ['rules/x.ts', "import { planNow } from '../planner';", /rules\/ imports only types from the contract and the planner/],
    ['rules/x.ts', "import { createHash } from 'node:crypto';", /Node built-ins are not available/],
    ['operations/x.ts', "import type { drain } from '../workflows/drain';", /operations\/ imports only rules\/, the planner and the broker/],
    ['operations/x.ts', "import { createActivities } from '../activities';", /operations\/ imports only rules\/, the planner and the broker/],
    ['operations/x.ts', "import { loadEnv } from '../worker/config';", /operations\/ imports only rules\/, the planner and the broker/],
    ['activities/x.ts', "import type { RelayInput } from '../workflows/relay';", /Activities import only the folders beneath them/],
    ['activities/x.ts', "import { ensureRelay } from '../worker/relay';", /Activities import only the folders beneath them/],
    ['workflows/steps/x.ts', "import type { Env } from '../../worker/config';", /Workflows import nothing of the folders above them/],
    ['workflows/x.ts', "import { outcomeOf } from '../operations/moves';", /Workflows import only types/],
    ['worker/x.ts', "import { loadAdminEnv } from '../admin/main';", /The worker imports only the folders beneath it/],
    ['worker/x.ts', "import { ensureRebalancer } from '../client/rebalancer';", /The worker imports only the folders beneath it/],
    ['client/commands/x.ts', "import { readAudit } from '../../admin/audit';", /The CLI imports only the folders beneath it/],
    ['client/x.ts', "import { startAdminService } from '../admin/main';", /The CLI imports only the folders beneath it/],
    ['admin/x.ts', "import { dryRun } from '../client/dry-run';", /The admin API imports only the folders beneath it/],
    ['admin/x.ts', "import { startAdminService } from '../scripts/start';", /The admin API imports only the folders beneath it/],
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
    ['rules/x.ts', "import type { PlannerConfig } from '../planner/types';"],
    ['operations/x.ts', "import { reconfigurationWorkflowId } from '../rules/definitions';"],
    ['activities/x.ts', "import { outcomeOf } from '../operations/moves';"],
    ['workflows/x.ts', "import { WORKFLOW_TYPE } from '../rules/definitions';"],
    ['worker/x.ts', "import { ensureRebalancer } from '../operations/rebalancer';"],
    ['client/commands/x.ts', "import { readAudit } from '../../operations/audit';"],
    ['admin/x.ts', "import { nodeScores } from '../operations/scores';"],
  ])('lets through, in %s, %s', async (file, code) => {
    expect(await refused(file, code)).toEqual([]);
  });
});
