import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_PLANNER_CONFIG } from '../../planner';
import { ConfigError, loadEnv, rebalancerSettings } from '../../worker/config';

const settings = (vars: Record<string, string>) => rebalancerSettings(loadEnv(vars));

describe('rebalancer settings from the environment', () => {
  it('defaults to the planner defaults and a 10 s tick', () => {
    expect(settings({})).toEqual({ planner: DEFAULT_PLANNER_CONFIG, tickMs: 10_000, ticksPerRun: 500, mode: 'auto' });
  });

  it('takes every setting, weights by name', () => {
    const s = settings({
      REBALANCER_TICK_MS: '250',
      REBALANCER_WEIGHTS: 'owned=2,traffic=0.5',
      REBALANCER_THRESHOLD: '0.2',
      REBALANCER_MAX_TRANSFERS_PER_NODE: '3',
      REBALANCER_NODE_COOLDOWN_MS: '0',
      REBALANCER_REPLACE_AFTER_MS: '0',
      REBALANCER_BANDS: 'replicas=0.03,traffic=0.2',
    });
    expect(s.planner.bands).toEqual({ ...DEFAULT_PLANNER_CONFIG.bands, replicas: 0.03, traffic: 0.2 });
    expect(s.tickMs).toBe(250);
    expect(settings({ REBALANCER_MODE: 'propose' }).mode).toBe('propose');
    expect(s.planner).toMatchObject({ weights: { ...DEFAULT_PLANNER_CONFIG.weights, owned: 2, traffic: 0.5 }, threshold: 0.2, maxTransfersPerNode: 3, nodeCooldownMs: 0, replaceAfterMs: 0 });
  });

  it.each([
    [{ REBALANCER_THRESHOLD: '0' }, /REBALANCER_THRESHOLD="0" is invalid: expected a number above 0/],
    [{ REBALANCER_MIN_IMPROVEMENT: '-1' }, /REBALANCER_MIN_IMPROVEMENT="-1" is invalid: expected a number above 0/],
    [{ REBALANCER_MAX_TRANSFERS_PER_CLUSTER: '0' }, /REBALANCER_MAX_TRANSFERS_PER_CLUSTER="0" is invalid: expected a whole number of at least 1/],
    [{ REBALANCER_TICK_MS: 'soon' }, /REBALANCER_TICK_MS="soon" is invalid/],
    [{ REBALANCER_PARTITION_COOLDOWN_MS: '-5' }, /REBALANCER_PARTITION_COOLDOWN_MS="-5" is invalid: expected milliseconds of at least 0/],
    [{ REBALANCER_REPLACE_AFTER_MS: '-1' }, /REBALANCER_REPLACE_AFTER_MS="-1" is invalid: expected milliseconds of at least 0/],
    [{ REBALANCER_REPLACE_AFTER_MS: '10m' }, /REBALANCER_REPLACE_AFTER_MS="10m" is invalid: expected whole milliseconds/],
    [{ REBALANCER_WEIGHTS: 'owned=-1' }, /REBALANCER_WEIGHTS="owned=-1" is invalid: expected name=number pairs/],
    [{ REBALANCER_WEIGHTS: 'disk=1' }, /names among owned, followed, history, traffic, sync/],
    [{ REBALANCER_WEIGHTS: 'owned=0,followed=0,history=0,traffic=0,sync=0' }, /REBALANCER_WEIGHTS is invalid: weights are all 0/],
    [{ REBALANCER_BANDS: 'cpu=0.1' }, /REBALANCER_BANDS="cpu=0.1" is invalid: "cpu=0.1": expected name=fraction pairs separated by commas, names among replicas, owned, disk, traffic/],
    [{ REBALANCER_BANDS: 'disk=wide' }, /REBALANCER_BANDS="disk=wide" is invalid: disk=wide: expected a fraction of the share/],
    [{ REBALANCER_BANDS: 'replicas=0' }, /REBALANCER_BANDS is invalid: bands.replicas is 0: expected a fraction above 0 and below 1 \(a band of 0 makes nodes trade copies back and forth\)/],
    [{ REBALANCER_MODE: 'manual' }, /^REBALANCER_MODE="manual" is invalid: expected one of auto, propose \(/],
    [{ REBALANCER_MODE: 'Propose' }, /^REBALANCER_MODE="Propose" is invalid: expected one of auto, propose/],
  ])('refuses %j naming the variable and what is expected', (vars, message) => {
    expect(() => settings(vars)).toThrow(ConfigError);
    expect(() => settings(vars)).toThrow(message);
  });

  it('an unknown REBALANCER_MODE stops the worker at start with one line naming the variable, its value and the allowed values', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
      cwd: path.resolve(import.meta.dirname, '../..'),
      env: { ...process.env, REBALANCER_MODE: 'manual' },
      encoding: 'utf8',
    });
    expect(run.status).toBe(2);
    expect(run.stderr.trim()).toMatch(/^configuration error: REBALANCER_MODE="manual" is invalid: expected one of auto, propose \(auto starts/);
  });
});
