/** One pino logger for the process; the Temporal runtime's own logs are routed into it. */
import { DefaultLogger, Runtime, makeTelemetryFilterString, type LogLevel, type LogMetadata } from '@temporalio/worker';
import pino, { type Logger } from 'pino';

export function createLogger(level: string, name = 'rebalancer'): Logger {
  return pino({ name, level });
}

const toPino: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

let installed = false;

/** Install the Temporal runtime once per process with its logs going to `logger`. */
export function installRuntimeLogger(logger: Logger): void {
  if (installed) return;
  installed = true;
  const temporal = logger.child({ component: 'temporal' });
  Runtime.install({
    logger: new DefaultLogger('INFO', (entry) => {
      const meta: LogMetadata = entry.meta ?? {};
      temporal[toPino[entry.level]](meta, entry.message);
    }),
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }), forward: {} } },
  });
}
