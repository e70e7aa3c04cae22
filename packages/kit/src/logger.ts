import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

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
    redact: { paths: ['req.headers.authorization', 'headers.authorization', 'apiKey', 'key'], censor: '[redacted]' },
    ...(pretty
      ? { transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname', messageFormat: '{service}: {msg}' } } }
      : {}),
  });
}
