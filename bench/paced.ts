import { rawConnection, request, type RawConnection } from './raw-http.js';

/**
 * An open-loop HTTP load generator at a fixed arrival rate, as wrk2 makes one: `connections`
 * keep-alive connections opened before the clock starts; request k is due at t0 + k/rate whatever
 * the answers before it are doing, and goes out on connection k mod `connections` at that moment,
 * or when that connection's answer before it has come (the wait counts); its latency runs from
 * when it was due to its answer. Every request's bytes are built before the clock starts, and the
 * connections are bare sockets (raw-http.ts), so the generator takes little of the cores memstream
 * runs on. Lateness of this process's own timers counts too: the figure can only err on the slow side.
 *
 * Why not autocannon's `overallRate` alone: autocannon (9.0, lib/httpClient.js) paces by the second —
 * each connection sends its share of a second's requests back to back as fast as answers come,
 * then waits for a 1 s interval to reset its count. So 1,000/s over 10 connections is ten closed
 * loops of 100 requests at the start of every second and then nothing: bursts at ten concurrent,
 * not a fixed rate. bench load runs either (--generator; docs/pipeline.md, "Load").
 */
export interface PacedResult {
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** Per answered 2xx request, ms from when it was due, ascending. */
  fromDue: number[];
  /** Per answered 2xx request, ms from when it was written to its connection, ascending. */
  fromSent: number[];
  /** Seconds from the first request due to the last answer. */
  secs: number;
  /** Per second of the schedule (by when requests were due): the 2xx answers' p99 from when due, ms. */
  p99BySecond: number[];
}

export async function pacedRun(opts: {
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  rate: number;
  seconds: number;
  connections: number;
  timeoutMs?: number;
  /** Request k's JSON body (none for a GET). */
  body?: (k: number) => string;
}): Promise<PacedResult> {
  const url = new URL(opts.url);
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const total = Math.round(opts.rate * opts.seconds);
  const req = (k: number) => request({ method: opts.method, host: url.host, path: url.pathname, headers: opts.headers, body: opts.body?.(k) });
  const one = opts.body ? null : req(0);
  const bytes = one ? null : Array.from({ length: total }, (_, k) => req(k));
  const conns: RawConnection[] = await Promise.all(Array.from({ length: opts.connections }, () => rawConnection(url.hostname, Number(url.port))));
  // Each connection's requests in order: the one due next waits for the answer before it.
  const tails: Array<Promise<void>> = conns.map(() => Promise.resolve());
  const r: PacedResult = { ok: 0, non2xx: 0, errors: 0, timeouts: 0, fromDue: [], fromSent: [], secs: 0, p99BySecond: [] };
  const bySecond: number[][] = Array.from({ length: Math.ceil(opts.seconds) }, () => []);
  const send = (k: number, due: number): Promise<void> => {
    const c = k % conns.length;
    const done = tails[c]!.then(async () => {
      const sent = performance.now();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((res) => (timer = setTimeout(() => res('timeout'), timeoutMs)));
      try {
        const answer = await Promise.race([conns[c]!.send(one ?? bytes![k]!), timedOut]);
        if (answer === 'timeout') {
          r.timeouts++;
          conns[c]!.close();
          return;
        }
        const at = performance.now();
        if (answer.status >= 200 && answer.status < 300) {
          r.ok++;
          r.fromDue.push(at - due);
          bySecond[Math.min(bySecond.length - 1, Math.floor(k / opts.rate))]!.push(at - due);
          r.fromSent.push(at - sent);
        } else r.non2xx++;
      } catch {
        r.errors++;
      } finally {
        clearTimeout(timer);
      }
    });
    tails[c] = done;
    return done;
  };
  const inflight: Promise<void>[] = [];
  const t0 = performance.now();
  for (let k = 0; k < total; ) {
    const now = performance.now();
    // Everything due by now goes out now, each with the moment it was due.
    for (; k < total && t0 + (k * 1000) / opts.rate <= now; k++) inflight.push(send(k, t0 + (k * 1000) / opts.rate));
    if (k < total) await new Promise((res) => setTimeout(res, Math.max(0, t0 + (k * 1000) / opts.rate - performance.now())));
  }
  await Promise.all(inflight);
  r.secs = (performance.now() - t0) / 1000;
  for (const c of conns) c.close();
  r.p99BySecond = bySecond.map((xs) => {
    xs.sort((a, b) => a - b);
    return xs.length ? +xs[Math.min(xs.length - 1, Math.floor(0.99 * xs.length))]!.toFixed(1) : NaN;
  });
  r.fromDue.sort((a, b) => a - b);
  r.fromSent.sort((a, b) => a - b);
  return r;
}
