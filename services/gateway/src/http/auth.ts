import { hash, timingSafeEqual } from 'node:crypto';
import { Router, type RequestHandler, type Response } from 'express';
import type { RateLimitErrorBody } from '@memstream/contracts';
import { AuthError, PermissionError, type Logger } from '@memstream/kit';
import { KEY_PREFIX, createScopedKey, listScopedKeys, parseKeyId, revokeScopedKey, verifyScopedKey, type KeyPorts } from '../handlers/keys.js';
import { tagScope, type Principal, type TagScope } from '../handlers/scope.js';
import type { RateLimit, RateLimiter } from '../adapters/rate-limit.js';
import { requestLog } from './request-log.js';

export type { Principal };

export interface AuthOptions {
  /** Scoped keys; absent: only the admin key is accepted. */
  keys?: KeyPorts;
  /** Token buckets shared by the replicas; absent: nothing is rate-limited. */
  limiter?: RateLimiter;
  /** The admin key's limit (MEMSTREAM_ADMIN_RATE_LIMIT); absent: unlimited. */
  adminRateLimit?: RateLimit;
  log?: Logger;
}

function digest(s: string): Buffer {
  return hash('sha256', s, 'buffer');
}

/**
 * Bearer auth: the admin key (compared in constant time, over digests so lengths leak nothing)
 * or a scoped key (see verifyScopedKey), then the key's rate limit. Every refusal is a 401
 * `{error, details}` (429 for the rate limit), never a 5xx.
 */
export function authenticate(adminKey: string, opts: AuthOptions = {}): RequestHandler {
  const admin = digest(adminKey);
  return async (req, res, next) => {
    try {
      const h = req.headers.authorization;
      if (!h) throw new AuthError('Unauthorized', 'missing Authorization header: send "Authorization: Bearer <API key>"');
      const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
      if (!m) throw new AuthError('Unauthorized', 'malformed Authorization header: expected "Bearer <API key>"');
      const token = m[1]!;
      let principal: Principal;
      let limit: RateLimit | undefined;
      let bucket: string;
      if (timingSafeEqual(digest(token), admin)) {
        principal = { kind: 'admin' };
        limit = opts.adminRateLimit;
        bucket = 'admin';
      } else if (token.startsWith(KEY_PREFIX) && opts.keys) {
        if (parseKeyId(token) === null) throw new AuthError('Unauthorized', `malformed API key: a scoped key looks like ${KEY_PREFIX}<id>_<secret>`);
        const record = await verifyScopedKey(opts.keys, token);
        principal = { kind: 'scoped', keyId: record.id, containerTags: [...record.containerTags] };
        limit = { max: record.rateLimitMax, windowMs: record.rateLimitTimeWindow };
        bucket = `key.${record.id}`;
      } else {
        throw new AuthError('Unauthorized', 'invalid API key');
      }
      res.locals.principal = principal;
      if (limit && opts.limiter) {
        const r = await opts.limiter.take(bucket, limit);
        if (!r.ok) {
          const seconds = Math.max(1, Math.ceil(r.retryAfterMs / 1000));
          res.setHeader('retry-after', String(seconds));
          res.setHeader('retry-after-ms', String(r.retryAfterMs));
          res.setHeader('x-ratelimit-limit', String(limit.max));
          res.setHeader('x-ratelimit-remaining', '0');
          const body: RateLimitErrorBody = {
            error: 'Too many requests',
            details: `rate limit of ${limit.max} requests per ${limit.windowMs} ms exceeded for this API key; retry in ${r.retryAfterMs} ms`,
            retryAfterSeconds: seconds,
          };
          res.status(429).json(body);
          return;
        }
        res.setHeader('x-ratelimit-limit', String(limit.max));
        if (r.remaining >= 0) res.setHeader('x-ratelimit-remaining', String(r.remaining));
      }
      next();
    } catch (err) {
      next(err);
    }
  };
}

/** The caller, as `authenticate` set it. A route reached without it is refused, never let through. */
export function principalOf(res: Response): Principal {
  const p = res.locals.principal as Principal | undefined;
  if (!p) throw new AuthError('Unauthorized', 'no API key was checked for this route');
  return p;
}

/** The container tags the caller may reach: null for the admin key. */
export function scopeOf(res: Response): TagScope {
  return tagScope(principalOf(res));
}

/** 403 for a scoped key. */
export const requireAdmin: RequestHandler = (_req, res, next) => {
  const p = principalOf(res);
  if (p.kind !== 'admin') return next(new PermissionError('Forbidden', 'this operation needs the admin API key; scoped API keys may only use /v3/documents, /v3/search and /v4/search'));
  next();
};

/** POST, GET /v3/auth/scoped-key and DELETE /v3/auth/scoped-key/{id}: admin only. */
export function keyRoutes(keys: KeyPorts, log?: Logger): Router {
  const r = Router();
  r.post('/v3/auth/scoped-key', requireAdmin, async (req, res) => {
    const out = await createScopedKey(keys, req.body ?? {});
    // Never the key: its id is enough to find it again.
    if (log) requestLog(log, res).info({ keyId: out.id, containerTags: out.containerTags, expiresAt: out.expiresAt }, 'scoped API key created');
    res.json(out);
  });
  r.get('/v3/auth/scoped-key', requireAdmin, async (_req, res) => {
    res.json(await listScopedKeys(keys));
  });
  r.delete('/v3/auth/scoped-key/:id', requireAdmin, async (req, res) => {
    const out = await revokeScopedKey(keys, req.params.id as string);
    if (log) requestLog(log, res).info({ keyId: out.id, revokedAt: out.revokedAt }, 'scoped API key revoked');
    res.json(out);
  });
  return r;
}
