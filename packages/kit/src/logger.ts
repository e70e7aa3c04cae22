import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

type LogContext = () => Record<string, unknown> | undefined;
const LOG_CONTEXT = Symbol.for('memstream.kit.logContext');

/**
 * Fields added to every log line at the moment it is written: @memstream/telemetry installs one
 * that adds the active span's traceId and spanId. A global slot, so a logger made before the
 * telemetry loaded (or by another copy of this module) still gets them.
 */
export function setLogContext(fn: LogContext | null): void {
  (globalThis as Record<symbol, unknown>)[LOG_CONTEXT] = fn ?? undefined;
}

function logContext(): Record<string, unknown> {
  const fn = (globalThis as Record<symbol, unknown>)[LOG_CONTEXT] as LogContext | undefined;
  return fn?.() ?? {};
}

/**
 * pino JSON logs; a pretty form when MEMSTREAM_LOG_PRETTY=1 (the launcher sets it for a
 * terminal). Secrets never reach a log line: the redact list covers the places they travel.
 */
export function createLogger(service: string, opts: { level?: string; pretty?: boolean } = {}): Logger {
  const pretty = opts.pretty ?? process.env.MEMSTREAM_LOG_PRETTY === '1';
  return pino({
    name: service,
    level: opts.level ?? process.env.LOG_LEVEL ?? 'info',
    base: { service },
    mixin: logContext,
    redact: { paths: ['req.headers.authorization', 'headers.authorization', 'apiKey', 'key'], censor: '[redacted]' },
    ...(pretty
      ? { transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname', messageFormat: '{service}: {msg}' } } }
      : {}),
  });
}
