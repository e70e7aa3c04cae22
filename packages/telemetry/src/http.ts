import type { IncomingMessage, ServerResponse } from 'node:http';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace, type Context } from '@opentelemetry/api';
import { httpDuration, scrape } from './metrics.js';
import { continuedSpanContext, formatTraceparent, requestSpanContext, spansRecorded, tracer } from './tracing.js';
import { telemetryConfigFrom } from './config.js';

/** What the middleware reads of an Express request and response (structural: no Express dependency here). */
type Req = IncomingMessage & { route?: { path?: unknown }; baseUrl?: string };
type Res = ServerResponse & { locals: Record<string, unknown> };
type Next = (err?: unknown) => void;

/** Probes and scrapes: measured, but not traced (they would bury the document traces). */
const UNTRACED = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * First middleware of the gateway: a server span per request, continued from the request's
 * traceparent when it has a valid one; `res.locals.traceparent` is that span's context (what the
 * handlers publish with) and `x-trace-id` its trace id; the handlers run in its context, so log
 * lines carry its ids. On finish, the request goes into memstream_http_request_duration_seconds
 * by method, route pattern and status.
 *
 * When this process records no spans (no exporter: startTelemetry), the request gets the same ids
 * without a span object and without a context: no propagator, no sampler, no attributes, req and
 * res not patched to carry a context to their listeners, and no AsyncLocalStorage at all. Node 20's
 * AsyncLocalStorage runs a hook on every promise of the process once it is first used; that, the
 * span and the patched emitters were about a third of an add's CPU. The handlers then publish
 * with res.locals.traceparent as before, and put `requestTraceFields(res)` on their log lines.
 */
export function httpTelemetry(opts: { recordSpans?: boolean } = {}): (req: Req, res: Res, next: Next) => void {
  const record = opts.recordSpans ?? spansRecorded();
  return record ? recorded : lean;
}

/** The route pattern that answered, never the raw path: one series per route, not one per document id. */
function routeOf(req: Req): string {
  return req.route && typeof req.route.path === 'string' ? (req.baseUrl ?? '') + req.route.path : '(unmatched)';
}

function observe(req: Req, route: string, status: number, t0: number): void {
  httpDuration.observe({ method: req.method ?? '', route, status: String(status) }, (performance.now() - t0) / 1000);
}

function pathOf(req: Req): string {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

function lean(req: Req, res: Res, next: Next): void {
  const t0 = performance.now();
  res.once('close', () => observe(req, routeOf(req), res.statusCode, t0));
  if (UNTRACED.has(pathOf(req))) return next();
  const tp = req.headers.traceparent;
  const sc = continuedSpanContext(typeof tp === 'string' ? tp : undefined);
  res.locals.traceparent = formatTraceparent(sc);
  res.locals[TRACE_FIELDS] = { traceId: sc.traceId, spanId: sc.spanId };
  res.setHeader('x-trace-id', sc.traceId);
  next();
}

const TRACE_FIELDS = 'traceFields';

/**
 * The trace ids a log line about this request must carry itself: set when spans are not recorded
 * (then no context is active in the handlers, see httpTelemetry), absent when they are (then the
 * log lines get them from the active span, as every line of a worker does).
 */
export function requestTraceFields(res: { locals: Record<string, unknown> }): { traceId: string; spanId: string } | undefined {
  return res.locals[TRACE_FIELDS] as { traceId: string; spanId: string } | undefined;
}

function recorded(req: Req, res: Res, next: Next): void {
  const t0 = performance.now();
  const path = pathOf(req);
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
    const route = routeOf(req);
    const status = res.statusCode;
    observe(req, route, status, t0);
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
}

/**
 * A middleware that calls `next` from a stream event (a body parser, multer), made to call it in
 * the context it was entered with: the request's, so the handlers after it log and publish in the
 * request's trace whether or not req was bound to it. Without an active context (no spans
 * recorded), the middleware itself.
 */
export function keepContext<Q, S>(mw: (req: Q, res: S, next: Next) => void): (req: Q, res: S, next: Next) => void {
  return (req, res, next) => {
    const ctx: Context = context.active();
    if (ctx === ROOT_CONTEXT) return mw(req, res, next);
    mw(req, res, (err) => context.with(ctx, next, undefined, err));
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
