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

/**
 * A connection idle for longer than this is opened anew before the next request: Node's HTTP
 * server closes keep-alive sockets idle for 5 s (keepAliveTimeout), and a request written as it
 * does so would be lost (bench ingest's connections wait out the pipeline between its phases).
 */
const IDLE_REOPEN_MS = 4_000;

export async function rawConnection(host: string, port: number): Promise<RawConnection> {
  type Waiter = { resolve: (r: { status: number; body: Buffer }) => void; reject: (e: Error) => void };
  const queue: Array<{ buf: Buffer; w: Waiter }> = [];
  let current: Waiter | null = null;
  let acc: Buffer = Buffer.alloc(0);
  let need: { status: number; headerLen: number; bodyLen: number } | null = null;
  let socket: Socket | null = null;
  let closing = false;
  let lastAnswer = performance.now();

  const open = () =>
    new Promise<Socket>((resolve, reject) => {
      const s = connect({ host, port, noDelay: true }, () => resolve(s));
      s.once('error', reject);
      s.on('data', (chunk: Buffer) => onData(s, chunk));
      // A socket the server closed while idle is opened again at the next request; one closed with an answer owed fails it.
      s.on('close', () => {
        if (socket !== s) return;
        socket = null;
        if (current) fail(new Error('the connection closed before the answer'));
      });
      s.on('error', () => {});
    });
  const fail = (err: Error) => {
    const w = current;
    current = null;
    acc = Buffer.alloc(0);
    need = null;
    w?.reject(err);
    next();
  };
  const next = () => {
    if (current || queue.length === 0 || closing) return;
    const { buf, w } = queue.shift()!;
    current = w;
    const stale = !socket || performance.now() - lastAnswer > IDLE_REOPEN_MS;
    if (!stale) {
      socket!.write(buf);
      return;
    }
    socket?.destroy();
    socket = null;
    open().then(
      (s) => {
        socket = s;
        s.write(buf);
      },
      (err: Error) => fail(err),
    );
  };
  function onData(s: Socket, chunk: Buffer): void {
    if (s !== socket) return;
    acc = acc.length === 0 ? chunk : Buffer.concat([acc, chunk]);
    for (;;) {
      if (!need) {
        const end = acc.indexOf(HEADER_END);
        if (end < 0) return;
        const head = acc.subarray(0, end).toString('latin1');
        const status = Number(head.slice(9, 12));
        const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        if (!m) {
          s.destroy();
          return fail(new Error(`an answer without content-length (status ${status}): this client reads only those`));
        }
        need = { status, headerLen: end + 4, bodyLen: Number(m[1]) };
      }
      if (acc.length < need.headerLen + need.bodyLen) return;
      const body = acc.subarray(need.headerLen, need.headerLen + need.bodyLen);
      const status = need.status;
      acc = acc.subarray(need.headerLen + need.bodyLen);
      need = null;
      lastAnswer = performance.now();
      const w = current;
      current = null;
      w?.resolve({ status, body });
      next();
    }
  }
  socket = await open();
  return {
    send(buf) {
      return new Promise((resolve, reject) => {
        if (closing) return reject(new Error('the connection is closed'));
        queue.push({ buf, w: { resolve, reject } });
        next();
      });
    },
    close: () => {
      closing = true;
      socket?.destroy();
      socket = null;
    },
  };
}
