import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadEnv, temporalSettings } from '../../worker/config';

const root = path.resolve(import.meta.dirname, '../..');

describe('configuration from the environment', () => {
  it('has defaults for a local run', () => {
    const env = loadEnv({});
    expect(env.TEMPORAL_NAMESPACE).toBe('default');
    expect(env.TEMPORAL_TASK_QUEUE).toBe('rebalancer');
    expect(temporalSettings(env, '127.0.0.1:7233').tls).toBeUndefined();
  });

  it.each([
    [{ TEMPORAL_ADDRESS: 'localhost' }, /TEMPORAL_ADDRESS="localhost" is invalid: expected host:port/],
    [{ TEMPORAL_ADDRESS: 'localhost:99999' }, /TEMPORAL_ADDRESS="localhost:99999" is invalid: expected a port/],
    [{ TEMPORAL_NAMESPACE: '' }, /TEMPORAL_NAMESPACE="" is invalid: expected a non-empty namespace/],
    [{ TEMPORAL_TLS_CERT: '/nonexistent/cert.pem', TEMPORAL_TLS_KEY: '/nonexistent/key.pem' }, /TEMPORAL_TLS_CERT="\/nonexistent\/cert.pem" is invalid: expected a readable file/],
    [{ TEMPORAL_API_KEY: 'k', TEMPORAL_TLS: 'false' }, /TEMPORAL_API_KEY is set but TEMPORAL_TLS=false/],
    [{ CLUSTER_URL: 'ftp://x' }, /CLUSTER_URL="ftp:\/\/x" is invalid: expected an http\(s\) URL/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL="loud" is invalid/],
  ])('refuses %j with one line naming the variable', (vars, message) => {
    expect(() => loadEnv(vars)).toThrow(ConfigError);
    expect(() => loadEnv(vars)).toThrow(message);
  });

  it('turns TLS on for an API key (Temporal Cloud)', () => {
    const s = temporalSettings(loadEnv({ TEMPORAL_API_KEY: 'secret' }), 'ns.acct.tmprl.cloud:7233');
    expect(s.tls).toBeDefined();
    expect(s.apiKey).toBe('secret');
  });

  it('stops the worker process at start with one line and no stack trace', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
      cwd: root,
      env: { ...process.env, TEMPORAL_ADDRESS: '127.0.0.1' },
      encoding: 'utf8',
    });
    expect(run.status).toBe(2);
    expect(run.stderr.trim()).toBe('configuration error: TEMPORAL_ADDRESS="127.0.0.1" is invalid: expected host:port, for example 127.0.0.1:7233');
  });
});
