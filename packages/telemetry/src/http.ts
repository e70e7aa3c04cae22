import type { IncomingMessage, ServerResponse } from 'node:http';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace } from '@opentelemetry/api';
import { httpDuration, scrape } from './metrics.js';
import { formatTraceparent, requestSpanContext, tracer } from './tracing.js';
import { telemetryConfigFrom } from './config.js';

/** What the middleware reads of an Express request and response (structural: no Express dependency here). */
type Req = IncomingMessage & { route?: { path?: unknown }; baseUrl?: string };
type Res = ServerResponse & { locals: Record<string, unknown> };

/** Probes and scrapes: measured, but not traced (they would bury the document traces). */
const UNTRACED = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * First middleware of the gateway: a server span per request, continued from the request's
 * traceparent when it has a valid one; `res.locals.traceparent` is that span's context (what the
 * handlers publish with) and `x-trace-id` its trace id. On finish, the request goes into
 * memstream_http_request_duration_seconds by method, route pattern and status.
 */
export function httpTelemetry(): (req: Req, res: Res, next: (err?: unknown) => void) => void {
  return (req, res, next) => {
    const t0 = performance.now();
    const path = (req.url ?? '/').split('?')[0]!;
    const incoming = typeof req.headers.traceparent === 'string' ? req.headers.traceparent : undefined;
    const carrier: Record<string, string> = {};
    if (incoming) carrier.traceparent = incoming;
    if (typeof req.headers.tracestate === 'string') carrier.tracestate = req.headers.tracestate;
    const parent = propagation.extract(ROOT_CONTEXT, carrier);
    const traced = !UNTRACED.has(path);
    const span = traced
      ? tracer().startSpan(req.method ?? 'HTTP', { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method ?? '', 'url.path': path } }, parent)
      : null;
    const sc = span ? requestSpanContext(span, incoming) : null;
    const ctx = span && sc ? trace.setSpan(parent, span.isRecording() ? span : trace.wrapSpanContext(sc)) : parent;
    if (sc) {
      res.locals.traceparent = formatTraceparent(sc);
      res.setHeader('x-trace-id', sc.traceId);
    }
    res.once('close', () => {
      // The pattern, never the raw path: one series per route, not one per document id.
      const route = req.route && typeof req.route.path === 'string' ? (req.baseUrl ?? '') + req.route.path : '(unmatched)';
      const status = res.statusCode;
      httpDuration.observe({ method: req.method ?? '', route, status: String(status) }, (performance.now() - t0) / 1000);
      if (span) {
        span.updateName(`${req.method} ${route}`);
        span.setAttribute('http.route', route);
        span.setAttribute('http.response.status_code', status);
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        if (!res.writableFinished) span.setAttribute('http.aborted', true);
        span.end();
      }
    });
    // Body parsers and multer call on from stream events: bound, they stay inside the request's span.
    context.bind(ctx, req);
    context.bind(ctx, res);
    context.with(ctx, () => next());
  };
}

/**
 * GET /metrics for an Express app: the process's Prometheus exposition, open unless
 * MEMSTREAM_METRICS_TOKEN is set (then a Bearer token is wanted).
 */
export function metricsHandler(token: string | null = telemetryConfigFrom().metricsToken): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    scrape(req.headers.authorization, token).then(
      (m) => {
        res.writeHead(m.status, { 'content-type': m.contentType, 'cache-control': 'no-store' });
        res.end(m.body);
      },
      (err: unknown) => {
        res.writeHead(500, { 'content-type': 'application/json; charset=utf-8' });
        res.end(JSON.stringify({ error: 'Metrics failed', details: String((err as Error)?.message ?? err) }));
      },
    );
  };
}
