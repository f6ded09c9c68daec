/** One pino logger for the process; the Temporal runtime's own logs are routed into it. */
import { DefaultLogger, Runtime, makeTelemetryFilterString, type LogLevel, type LogMetadata } from '@temporalio/worker';
import pino, { type DestinationStream, type Logger } from 'pino';

/** `json`: pino's lines, for log collectors; `pretty`: one readable line per entry, for people at a terminal. */
export type LogFormat = 'json' | 'pretty';

/** Readable lines on a terminal, pino's JSON otherwise (a file, a pipe, a service manager); LOG_FORMAT overrides. */
export function chooseLogFormat(chosen?: LogFormat): LogFormat {
  return chosen ?? (process.stdout.isTTY ? 'pretty' : 'json');
}

export function createLogger(level: string, name = 'rebalancer', format?: LogFormat): Logger {
  return chooseLogFormat(format) === 'pretty' ? pino({ name, level }, prettyDestination((line) => process.stdout.write(line))) : pino({ name, level });
}

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** What pino adds to every entry that the pretty line shows in its own place, or not at all. */
const SHOWN_APART = new Set(['level', 'time', 'name', 'msg', 'pid', 'hostname']);

function plainValue(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value);
}

/** Formats one pino JSON entry as `HH:MM:SS LEVEL name: message key=value ...`. */
export function prettyLine(json: string): string {
  return prettyEntry(JSON.parse(json) as Record<string, unknown>);
}

/** prettyLine of an entry already parsed. */
export function prettyEntry(entry: Record<string, unknown>): string {
  const time = new Date(entry.time as number).toISOString().slice(11, 19);
  const level = (LEVEL_NAMES[entry.level as number] ?? String(entry.level)).padEnd(5);
  const err = entry.err as { message?: string; stack?: string } | undefined;
  const fields = Object.entries(entry)
    .filter(([key]) => !SHOWN_APART.has(key) && !(key === 'err' && typeof err === 'object'))
    .map(([key, value]) => `${key}=${plainValue(value)}`);
  const errText = err && typeof err === 'object' ? `\n  ${err.stack ?? err.message}` : '';
  return `${time} ${level} ${entry.name ? `${String(entry.name)}: ` : ''}${String(entry.msg ?? '')}${fields.length ? ' ' + fields.join(' ') : ''}${errText}\n`;
}

function prettyDestination(write: (line: string) => void): DestinationStream {
  return { write: (chunk: string) => write(prettyLine(chunk)) };
}

const toPino: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

let installed = false;

/** The bundler's webpack report: fifteen lines about the build at INFO bury the start-up lines people read. */
export function isWebpackReport(level: LogLevel, message: string): boolean {
  return level === 'INFO' && message.includes('\n') && /\bwebpack \d+\.\d+\.\d+ compiled/.test(message);
}

/**
 * Install the Temporal runtime once per process with its logs going to `logger`; `metricsBindAddress` (host:port):
 * the SDK's own worker metrics are served there for Prometheus.
 */
export function installRuntimeLogger(logger: Logger, metricsBindAddress?: string): void {
  if (installed) return;
  installed = true;
  const temporal = logger.child({ component: 'temporal' });
  Runtime.install({
    logger: new DefaultLogger('INFO', (entry) => {
      const meta: LogMetadata = entry.meta ?? {};
      temporal[isWebpackReport(entry.level, entry.message) ? 'debug' : toPino[entry.level]](meta, entry.message);
    }),
    telemetryOptions: {
      logging: { filter: makeTelemetryFilterString({ core: 'WARN' }), forward: {} },
      // Prometheus conventions, as the service's own metrics: `_total` on counters, the unit in the name, seconds.
      ...(metricsBindAddress
        ? { metrics: { prometheus: { bindAddress: metricsBindAddress, countersTotalSuffix: true, unitSuffix: true, useSecondsForDurations: true } } }
        : {}),
    },
  });
}
