/**
 * The least a durable add can do, as a bound for `bench ingest`'s add throughput: a bare node:http
 * server that reads the request's body, publishes it to a JetStream file stream through the same
 * NATS client as the gateway (`connectBus`, message id set, so deduplicated as the gateway's
 * events are), waits for the server's acknowledgement and answers 200 with an id. No Express, no
 * auth, no validation, no tag context, lanes or tracing. Run by bench/ingest.ts as a child process
 * of its own (a fresh process, as the gateway is at the measured phase), which says `{ port }`
 * over IPC once it listens. Its stream (BARE, subjects bare.>) is the bench's to create and delete.
 */
import { createServer } from 'node:http';
import { connectBus } from '@memstream/bus';
import { createLogger } from '@memstream/kit';

const bus = await connectBus({ url: process.env.NATS_URL!, name: 'bench-bare-front-door', log: createLogger('bench-bare', { level: 'warn' }) });
let n = 0;
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const id = `bare-${n++}`;
    bus.js.publish(`bare.${id}`, Buffer.concat(chunks), { msgID: id }).then(
      () => {
        const text = JSON.stringify({ id, status: 'queued' });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      },
      (err: unknown) => {
        res.writeHead(503, { 'content-length': 0 });
        res.end();
        process.stderr.write(`bare front door: publish failed: ${String(err)}\n`);
      },
    );
  });
});
server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as { port: number }).port }));
process.on('disconnect', () => process.exit(0));
