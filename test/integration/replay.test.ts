/**
 * Histories saved from the integration runs (refresh with SAVE_HISTORIES=1) replay under the current
 * workflow code without nondeterminism: a change that would break running moves fails here.
 */
import fs from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { WORKFLOWS_PATH } from '../../worker/worker';
// Routes the Temporal runtime's logs through the tests' quiet logger.
import './helpers';

const dir = path.resolve(import.meta.dirname, '../fixtures/histories');
const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.json')) : [];

describe('replay of saved move histories', () => {
  it('has saved histories to replay', () => {
    expect(files.length).toBeGreaterThanOrEqual(4);
  });

  it('replays every saved history under the current workflow code', async () => {
    const histories = files.map((f) => ({
      workflowId: path.basename(f, '.json'),
      history: temporal.api.history.v1.History.fromObject(JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as object),
    }));
    const results = [];
    for await (const result of Worker.runReplayHistories({ workflowsPath: WORKFLOWS_PATH }, histories)) {
      results.push({ id: result.workflowId, error: result.error?.message ?? null });
    }
    expect(results).toEqual(histories.map((h) => ({ id: h.workflowId, error: null })));
  });
});
