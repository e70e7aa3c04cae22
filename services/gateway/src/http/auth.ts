import { timingSafeEqual, createHash } from 'node:crypto';
import type { RequestHandler } from 'express';
import { AuthError } from '@memstream/kit';

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/** Bearer auth against the admin key, compared in constant time (over digests, so lengths leak nothing). */
export function bearerAuth(adminKey: string): RequestHandler {
  const want = digest(adminKey);
  return (req, _res, next) => {
    const h = req.headers.authorization;
    if (!h) return next(new AuthError('Unauthorized', 'missing Authorization header: send "Authorization: Bearer <API key>"'));
    const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
    if (!m) return next(new AuthError('Unauthorized', 'malformed Authorization header: expected "Bearer <API key>"'));
    if (!timingSafeEqual(digest(m[1]!), want)) return next(new AuthError('Unauthorized', 'invalid API key'));
    next();
  };
}
