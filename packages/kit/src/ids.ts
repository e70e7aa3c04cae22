import { createHash, randomFillSync } from 'node:crypto';

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** A random 22-character base62 id (about 131 bits): one NATS subject token, URL-safe. */
export function newId(): string {
  const bytes = randomPool(22);
  let s = '';
  for (let i = bytes.start; i < bytes.end; i++) s += ALPHABET[bytes.pool[i]! % 62];
  return s;
}

// Random bytes from a pool filled 4 KB at a time: a randomBytes call per id (a buffer and a call
// into the system's generator each) was a visible part of every request's and message's cost.
const POOL = Buffer.allocUnsafe(4096);
let poolAt = POOL.length;
function randomPool(n: number): { pool: Buffer; start: number; end: number } {
  if (poolAt + n > POOL.length) {
    randomFillSync(POOL);
    poolAt = 0;
  }
  const start = poolAt;
  poolAt += n;
  return { pool: POOL, start, end: poolAt };
}

/** `bytes` random bytes as hex (trace and span ids), from the pool. */
export function randomHex(bytes: number): string {
  const r = randomPool(bytes);
  return r.pool.toString('hex', r.start, r.end);
}

/** The id of a document with a customId: derived, so concurrent adds land on one document without a read. */
export function documentIdForCustomId(customId: string, scope = 'default'): string {
  return 'c' + createHash('sha256').update(`${scope}\u0000${customId}`).digest('base64url').replace(/[^A-Za-z0-9]/g, '').slice(0, 23);
}

/** A follow-on event's id, derived from what caused it: a redelivered message emits the same ids. */
export function derivedEventId(causationId: string, type: string, n = 0): string {
  return createHash('sha256').update(`${causationId}\u0000${type}\u0000${n}`).digest('base64url').slice(0, 27);
}
