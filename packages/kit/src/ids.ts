import { createHash, randomBytes } from 'node:crypto';

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** A random 22-character base62 id (about 131 bits): one NATS subject token, URL-safe. */
export function newId(): string {
  const bytes = randomBytes(22);
  let s = '';
  for (const b of bytes) s += ALPHABET[b % 62];
  return s;
}

/** The id of a document with a customId: derived, so concurrent adds land on one document without a read. */
export function documentIdForCustomId(customId: string, scope = 'default'): string {
  return 'c' + createHash('sha256').update(`${scope}\u0000${customId}`).digest('base64url').replace(/[^A-Za-z0-9]/g, '').slice(0, 23);
}

/** A follow-on event's id, derived from what caused it: a redelivered message emits the same ids. */
export function derivedEventId(causationId: string, type: string, n = 0): string {
  return createHash('sha256').update(`${causationId}\u0000${type}\u0000${n}`).digest('base64url').slice(0, 27);
}
