/**
 * Settings from the environment, validated with zod. A bad setting stops the process at start with one
 * line naming the variable, its value and what was expected: no stack trace for configuration mistakes.
 */
import fs from 'node:fs';
import { z } from 'zod';
import { parseBands } from '../planner/config';
import { DEFAULT_PLANNER_CONFIG, validatePlannerConfig } from '../planner/config';
import type { PlannerConfig, ScoreWeights } from '../planner/types';
import { REBALANCER_MODES, type RebalancerSettings } from '../rules/definitions';

const hostPort = z
  .string()
  .regex(/^[^\s:/]+:\d{1,5}$/, 'expected host:port, for example 127.0.0.1:7233')
  .refine((v) => Number(v.split(':')[1]) > 0 && Number(v.split(':')[1]) < 65536, 'expected a port from 1 to 65535');
const existingFile = z.string().refine((p) => fs.existsSync(p) && fs.statSync(p).isFile(), 'expected a readable file that exists');
const flag = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
const url = z.url({ protocol: /^https?$/, error: 'expected an http(s) URL, for example http://127.0.0.1:7380' });

// -------------------------------------------------- the rebalancer loop (docs/configuration.md, "The rebalancer loop")

const positive = z.coerce.number().positive('expected a number above 0');
const atLeastOne = z.coerce.number().int('expected a whole number').min(1, 'expected a whole number of at least 1');
const millis = z.coerce.number({ error: 'expected whole milliseconds, for example 600000' }).int('expected whole milliseconds').min(0, 'expected milliseconds of at least 0');
const weightNames = ['owned', 'followed', 'history', 'traffic', 'sync'] as const;
const weights = z
  .string()
  .regex(
    new RegExp(`^(${weightNames.join('|')})=[0-9.]+(,(${weightNames.join('|')})=[0-9.]+)*$`),
    `expected name=number pairs separated by commas, names among ${weightNames.join(', ')}, for example owned=2,traffic=0.5`,
  )
  .transform((v) => Object.fromEntries(v.split(',').map((pair) => [pair.split('=')[0]!, Number(pair.split('=')[1])])) as Partial<ScoreWeights>);

const bands = z.string().transform((v, ctx) => {
  const r = parseBands(v);
  if (r.ok) return r.bands;
  ctx.addIssue({ code: 'custom', message: r.problem });
  return z.NEVER;
});

/** The loop's settings; absent ones take DEFAULT_PLANNER_CONFIG's values and the defaults below. */
const REBALANCER_ENV = {
  REBALANCER_TICK_MS: atLeastOne.default(10_000),
  REBALANCER_TICKS_PER_RUN: atLeastOne.default(500),
  REBALANCER_WEIGHTS: weights.optional(),
  REBALANCER_HISTORY_HALF_BYTES: positive.optional(),
  REBALANCER_THRESHOLD: positive.optional(),
  REBALANCER_BANDS: bands.optional(),
  REBALANCER_MIN_IMPROVEMENT: positive.optional(),
  REBALANCER_MAX_TRANSFERS_PER_NODE: atLeastOne.optional(),
  REBALANCER_MAX_TRANSFERS_PER_CLUSTER: atLeastOne.optional(),
  REBALANCER_NODE_COOLDOWN_MS: millis.optional(),
  REBALANCER_PARTITION_COOLDOWN_MS: millis.optional(),
  REBALANCER_SYNC_BYTES_PER_SEC: positive.optional(),
  REBALANCER_MODE: z
    .enum(REBALANCER_MODES, { error: `expected one of ${REBALANCER_MODES.join(', ')} (auto starts the planner's moves; propose publishes a plan and waits for \`rebalancer approve\`)` })
    .default('auto'),
  REBALANCER_REPLACE_AFTER_MS: millis.optional(),
};

/** The variable that sets each planner setting, so a refusal names what the operator can change. */
const PLANNER_SETTING_ENV: Record<Exclude<keyof PlannerConfig, 'weights' | 'bands'>, keyof typeof REBALANCER_ENV> & { weights: 'REBALANCER_WEIGHTS'; bands: 'REBALANCER_BANDS' } = {
  weights: 'REBALANCER_WEIGHTS',
  bands: 'REBALANCER_BANDS',
  historyHalfBytes: 'REBALANCER_HISTORY_HALF_BYTES',
  threshold: 'REBALANCER_THRESHOLD',
  minImprovement: 'REBALANCER_MIN_IMPROVEMENT',
  maxTransfersPerNode: 'REBALANCER_MAX_TRANSFERS_PER_NODE',
  maxTransfersPerCluster: 'REBALANCER_MAX_TRANSFERS_PER_CLUSTER',
  nodeCooldownMs: 'REBALANCER_NODE_COOLDOWN_MS',
  partitionCooldownMs: 'REBALANCER_PARTITION_COOLDOWN_MS',
  syncBytesPerSec: 'REBALANCER_SYNC_BYTES_PER_SEC',
  replaceAfterMs: 'REBALANCER_REPLACE_AFTER_MS',
};

/**
 * The loop's settings from the environment, checked as a whole by the planner's own validation (a threshold
 * and margin that would oscillate, limits below 1, ...); a refusal names the variable to change.
 */
export function rebalancerSettings(env: Env): RebalancerSettings {
  const planner: PlannerConfig = {
    ...DEFAULT_PLANNER_CONFIG,
    weights: { ...DEFAULT_PLANNER_CONFIG.weights, ...env.REBALANCER_WEIGHTS },
    bands: { ...DEFAULT_PLANNER_CONFIG.bands, ...env.REBALANCER_BANDS },
  };
  for (const [setting, variable] of Object.entries(PLANNER_SETTING_ENV) as [keyof PlannerConfig, keyof typeof REBALANCER_ENV][]) {
    const value = env[variable];
    if (setting !== 'weights' && setting !== 'bands' && value !== undefined) (planner as unknown as Record<string, unknown>)[setting] = value;
  }
  const problem = validatePlannerConfig(planner);
  if (problem) {
    const setting = problem.split(/[ .]/)[0] as keyof PlannerConfig;
    throw new ConfigError(`${PLANNER_SETTING_ENV[setting] ?? 'REBALANCER_*'} is invalid: ${problem}`);
  }
  return { planner, tickMs: env.REBALANCER_TICK_MS, ticksPerRun: env.REBALANCER_TICKS_PER_RUN, mode: env.REBALANCER_MODE };
}

/** Every variable the worker, the CLI and `npm start` read, with its default. Documented in docs/configuration.md. */
export const EnvSchema = z.object({
  TEMPORAL_ADDRESS: hostPort.optional(),
  TEMPORAL_NAMESPACE: z.string().min(1, 'expected a non-empty namespace').default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1, 'expected a non-empty task queue name').default('rebalancer'),
  TEMPORAL_TLS: flag.optional(),
  TEMPORAL_TLS_CERT: existingFile.optional(),
  TEMPORAL_TLS_KEY: existingFile.optional(),
  TEMPORAL_TLS_CA: existingFile.optional(),
  TEMPORAL_TLS_SERVER_NAME: z.string().min(1).optional(),
  TEMPORAL_API_KEY: z.string().min(1, 'expected a non-empty API key').optional(),
  TEMPORAL_PORT: z.coerce.number().int().min(1).max(65535).default(7233),
  TEMPORAL_UI_PORT: z.coerce.number().int().min(1).max(65535).default(8233),
  CLUSTER_URL: url.optional(),
  CLUSTER_TOKEN: z.string().min(1).optional(),
  CLUSTER_PORT: z.coerce.number().int().min(1).max(65535).default(7380),
  DATA_DIR: z.string().min(1).default('.data'),
  LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  LOG_FORMAT: z.enum(['json', 'pretty']).optional(),
  ...REBALANCER_ENV,
});
export type Env = z.infer<typeof EnvSchema>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export interface TemporalSettings {
  address: string;
  namespace: string;
  taskQueue: string;
  tls?: { serverNameOverride?: string; clientCertPair?: { crt: Buffer; key: Buffer }; serverRootCACertificate?: Buffer };
  apiKey?: string;
}

/** Parse the environment; throws ConfigError with one line on the first bad variable. */
export function loadEnv(source: NodeJS.ProcessEnv = process.env): Env {
  const input: Record<string, string> = {};
  for (const key of Object.keys(EnvSchema.shape)) {
    const value = source[key];
    if (value !== undefined && value !== '') input[key] = value;
    else if (value === '' && (key === 'TEMPORAL_NAMESPACE' || key === 'TEMPORAL_TASK_QUEUE')) input[key] = value;
  }
  const parsed = EnvSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const key = String(issue.path[0]);
    throw new ConfigError(`${key}=${JSON.stringify(source[key] ?? '')} is invalid: ${issue.message}`);
  }
  const env = parsed.data;
  if (env.TEMPORAL_API_KEY && env.TEMPORAL_TLS === false) {
    throw new ConfigError('TEMPORAL_API_KEY is set but TEMPORAL_TLS=false: an API key is only sent over TLS; set TEMPORAL_TLS=true or unset it');
  }
  if (Boolean(env.TEMPORAL_TLS_CERT) !== Boolean(env.TEMPORAL_TLS_KEY)) {
    const missing = env.TEMPORAL_TLS_CERT ? 'TEMPORAL_TLS_KEY' : 'TEMPORAL_TLS_CERT';
    throw new ConfigError(`${missing}="" is invalid: a client certificate needs both TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY`);
  }
  return env;
}

/**
 * The admin service's settings (`npm start`) and the worker's SDK metrics port: here beside the worker's, so
 * `npm run worker` reads its port without loading the admin service.
 */
export const AdminEnvSchema = z.object({
  ADMIN_HOST: z.string().min(1, 'expected a host to listen on, for example 127.0.0.1').default('127.0.0.1'),
  ADMIN_PORT: z.coerce.number().int().min(0).max(65535).default(7390),
  /** Where the CLI finds the admin service (`status` and `nodes` read through it); http://127.0.0.1:ADMIN_PORT by default. */
  ADMIN_URL: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL, for example http://127.0.0.1:7390' }).optional(),
  /** Unset: a token is generated for this run and printed. */
  ADMIN_TOKEN: z.string().min(16, 'expected at least 16 characters').optional(),
  /** The Temporal Web UI that move links point at; the dev server's UI by default. */
  TEMPORAL_UI_URL: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL, for example http://127.0.0.1:8233' }).optional(),
  /** The Temporal SDK's worker metrics (Prometheus) on 127.0.0.1; `npm start` defaults it, `npm run worker` serves them only when set. */
  WORKER_METRICS_PORT: z.coerce.number().int().min(1).max(65535).optional(),
});
export type AdminEnv = z.infer<typeof AdminEnvSchema>;

export function loadAdminEnv(source: NodeJS.ProcessEnv = process.env): AdminEnv {
  const input = Object.fromEntries(Object.keys(AdminEnvSchema.shape).flatMap((k) => (source[k] ? [[k, source[k]]] : [])));
  const parsed = AdminEnvSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const key = String(issue.path[0]);
  throw new ConfigError(`${key}=${JSON.stringify(source[key] ?? '')} is invalid: ${issue.message}`);
}

/** Connection settings for a Temporal server at `address` (the env's, or a local dev server's). */
export function temporalSettings(env: Env, address: string): TemporalSettings {
  const wantsTls = env.TEMPORAL_TLS ?? Boolean(env.TEMPORAL_TLS_CERT || env.TEMPORAL_API_KEY || env.TEMPORAL_TLS_CA);
  return {
    address,
    namespace: env.TEMPORAL_NAMESPACE,
    taskQueue: env.TEMPORAL_TASK_QUEUE,
    apiKey: env.TEMPORAL_API_KEY,
    tls: wantsTls
      ? {
          serverNameOverride: env.TEMPORAL_TLS_SERVER_NAME,
          clientCertPair:
            env.TEMPORAL_TLS_CERT && env.TEMPORAL_TLS_KEY
              ? { crt: fs.readFileSync(env.TEMPORAL_TLS_CERT), key: fs.readFileSync(env.TEMPORAL_TLS_KEY) }
              : undefined,
          serverRootCACertificate: env.TEMPORAL_TLS_CA ? fs.readFileSync(env.TEMPORAL_TLS_CA) : undefined,
        }
      : undefined,
  };
}

/** For entry points: print a ConfigError as one line and exit 2; anything else propagates. */
export function exitOnConfigError(err: unknown): never {
  if (err instanceof ConfigError) {
    process.stderr.write(`configuration error: ${err.message}\n`);
    process.exit(2);
  }
  throw err;
}
