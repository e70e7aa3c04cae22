import { connect, type Socket } from 'node:net';

/**
 * One keep-alive HTTP/1.1 connection for the benches' load generators, over a bare socket: the
 * request is bytes built by the caller (`request()`), the answer is read by its Content-Length.
 * The load generator shares the two cores with memstream, so what it costs is taken from what is
 * measured: node:http's client objects cost `bench load`'s generator 37–42 % of a core at 1,000
 * adds/s (autocannon 23 %), and `bench ingest`'s 0.24–0.35 CPU-ms per add. Requests on one
 * connection go one at a time, in order (no pipelining): `send` queues behind the one in flight.
 * An answer without Content-Length (chunked) is an error here: the routes the benches call set it.
 */
export interface RawConnection {
  send(request: Buffer): Promise<{ status: number; body: Buffer }>;
  close(): void;
}

const HEADER_END = Buffer.from('\r\n\r\n');

/** The bytes of one request. `body` is JSON text, or none. */
export function request(opts: { method: string; host: string; path: string; headers?: Record<string, string>; body?: string }): Buffer {
  const body = opts.body === undefined ? null : Buffer.from(opts.body);
  const lines = [`${opts.method} ${opts.path} HTTP/1.1`, `host: ${opts.host}`, 'connection: keep-alive'];
  for (const [k, v] of Object.entries(opts.headers ?? {})) lines.push(`${k}: ${v}`);
  if (body) lines.push('content-type: application/json', `content-length: ${body.byteLength}`);
  const head = Buffer.from(lines.join('\r\n') + '\r\n\r\n');
  return body ? Buffer.concat([head, body]) : head;
}

export async function rawConnection(host: string, port: number): Promise<RawConnection> {
  const socket: Socket = await new Promise((resolve, reject) => {
    const s = connect({ host, port, noDelay: true }, () => resolve(s));
    s.once('error', reject);
  });
  type Waiter = { resolve: (r: { status: number; body: Buffer }) => void; reject: (e: Error) => void };
  const queue: Array<{ buf: Buffer; w: Waiter }> = [];
  let current: Waiter | null = null;
  let acc: Buffer = Buffer.alloc(0);
  let need: { status: number; headerLen: number; bodyLen: number } | null = null;
  let failed: Error | null = null;

  const next = () => {
    if (current || queue.length === 0) return;
    const { buf, w } = queue.shift()!;
    current = w;
    socket.write(buf);
  };
  const fail = (err: Error) => {
    failed = err;
    for (const w of [current, ...queue.map((q) => q.w)]) w?.reject(err);
    current = null;
    queue.length = 0;
  };
  socket.on('data', (chunk: Buffer) => {
    acc = acc.length === 0 ? chunk : Buffer.concat([acc, chunk]);
    for (;;) {
      if (!need) {
        const end = acc.indexOf(HEADER_END);
        if (end < 0) return;
        const head = acc.subarray(0, end).toString('latin1');
        const status = Number(head.slice(9, 12));
        const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        if (!m) return fail(new Error(`an answer without content-length (status ${status}): this client reads only those`));
        need = { status, headerLen: end + 4, bodyLen: Number(m[1]) };
      }
      if (acc.length < need.headerLen + need.bodyLen) return;
      const body = acc.subarray(need.headerLen, need.headerLen + need.bodyLen);
      const status = need.status;
      acc = acc.subarray(need.headerLen + need.bodyLen);
      need = null;
      const w = current;
      current = null;
      w?.resolve({ status, body });
      next();
    }
  });
  socket.on('error', (err) => fail(err));
  socket.on('close', () => fail(failed ?? new Error('the connection closed')));
  return {
    send(buf) {
      if (failed) return Promise.reject(failed);
      return new Promise((resolve, reject) => {
        queue.push({ buf, w: { resolve, reject } });
        next();
      });
    },
    close: () => socket.destroy(),
  };
}
