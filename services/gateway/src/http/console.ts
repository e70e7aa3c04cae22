import path from 'node:path';
import { readFileSync } from 'node:fs';
import { Router, type RequestHandler } from 'express';

const DIR = path.join(import.meta.dirname, '..', '..', 'console');
const TYPES: Record<string, string> = { 'index.html': 'text/html; charset=utf-8', 'console.js': 'text/javascript; charset=utf-8', 'console.css': 'text/css; charset=utf-8' };
// Nothing but this origin: no CDN, no inline script or style, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/**
 * GET /console: the web console (docs/console.md), three static files read once at start. The
 * files hold no secret, so they are served without a key; the page asks for one and sends it
 * as a bearer token on every API call, like any client.
 */
export function consoleRoutes(): Router {
  const files = new Map(Object.keys(TYPES).map((name) => [name, readFileSync(path.join(DIR, name))]));
  const r = Router();
  const send = (name: string): RequestHandler => (_req, res) => {
    res.setHeader('content-type', TYPES[name]!);
    res.setHeader('content-security-policy', CSP);
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('cache-control', 'no-cache');
    res.end(files.get(name));
  };
  r.get('/console', send('index.html'));
  r.get('/console/', send('index.html'));
  for (const name of Object.keys(TYPES)) r.get(`/console/${name}`, send(name));
  return r;
}
