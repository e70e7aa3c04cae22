import type { ErrorRequestHandler, Express, NextFunction, Request, RequestHandler, Response } from 'express';

type Handle = (req: Request, res: Response, callback?: NextFunction) => void;

/**
 * One route taken past Express's router: the request sent a thousand times a second (POST
 * /v3/documents) paid about 0.2 CPU-ms for the router's walk, its per-request final handler and
 * res.send, against ~0.1 ms for Node's HTTP itself (bench/scratch measurements, issue 14).
 *
 * Only the exact method and URL are taken here; any other spelling of the path (a trailing slash,
 * a query string, another case) goes through the router, where the same route is registered with
 * the same middlewares. Here the request is set up as Express's app.handle sets it up (the app's
 * request and response prototypes, res.locals, req.res and res.req) and `route` is put on it as
 * the router would, so the middlewares (telemetry, auth, the body parser), the handler and the
 * error handler run on it unchanged, in the same order, with next() and thrown or rejected
 * errors meaning what they mean in Express.
 */
export function fastRoute(app: Express, route: { method: string; path: string }, chain: RequestHandler[], onError: ErrorRequestHandler): void {
  const a = app as unknown as { handle: Handle; request: object; response: object };
  const routed = a.handle.bind(app);
  // What the telemetry labels the request with (req.route.path), as the router would have set it.
  const routeInfo = { path: route.path };
  a.handle = (req, res, callback) => {
    if (req.method !== route.method || req.url !== route.path) return routed(req, res, callback);
    req.res = res;
    res.req = req;
    Object.setPrototypeOf(req, a.request);
    Object.setPrototypeOf(res, a.response);
    if (!res.locals) res.locals = Object.create(null);
    (req as { route?: unknown }).route = routeInfo;
    req.baseUrl = '';
    let i = 0;
    let failed = false;
    const fail = (err: unknown) => {
      // An error in the error handler itself (it answers every error it is given): end the answer.
      if (failed) {
        if (!res.headersSent) res.statusCode = 500;
        res.end();
        return;
      }
      failed = true;
      try {
        onError(err, req, res, fail);
      } catch (e) {
        fail(e);
      }
    };
    const next: NextFunction = (err?: unknown) => {
      if (failed) return;
      // Express's next('route') and next('router') leave this route; there is no other route to go to.
      if (err === 'route' || err === 'router') return fail(new Error(`next('${err}') on the add route`));
      if (err) return fail(err);
      const fn = chain[i++];
      if (!fn) return;
      try {
        const out = fn(req, res, next) as unknown;
        if (out instanceof Promise) out.then(undefined, (e: unknown) => next(e ?? new Error('rejected without a reason')));
      } catch (e) {
        next(e);
      }
    };
    next();
  };
}
