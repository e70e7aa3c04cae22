import type { Logger } from '@memstream/kit';
import { requestTraceFields } from '@memstream/telemetry';

/**
 * The logger for a line about one request: `log` with the request's trace ids bound, when no
 * active context adds them to every line (no spans recorded: see httpTelemetry), else `log`.
 * Either way the line carries the ids of the request's trace, as x-trace-id does.
 */
export function requestLog(log: Logger, res: { locals: Record<string, unknown> }): Logger {
  const fields = requestTraceFields(res);
  return fields ? log.child(fields) : log;
}
