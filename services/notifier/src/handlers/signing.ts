import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The Standard Webhooks scheme (https://www.standardwebhooks.com): the HMAC-SHA256 of
 * "<webhook-id>.<webhook-timestamp>.<body>" under the key that follows `whsec_` (base64), sent
 * as `webhook-signature: v1,<base64 signature>`. Receivers can verify with any Standard Webhooks
 * library or the few lines in docs/webhooks.md.
 */
export function signatureKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
}

export function sign(secret: string, id: string, timestamp: number, body: string): string {
  const mac = createHmac('sha256', signatureKey(secret)).update(`${id}.${timestamp}.${body}`).digest('base64');
  return `v1,${mac}`;
}

/** The headers of one signed POST. `timestamp` is in seconds since the epoch. */
export function signedHeaders(secret: string, id: string, timestamp: number, body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'memstream-webhooks/0.1',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': sign(secret, id, timestamp, body),
  };
}

/** Whether any `v1,` signature in a (space-separated) webhook-signature header matches. What a receiver does. */
export function verify(secret: string, id: string, timestamp: number, body: string, header: string): boolean {
  const want = Buffer.from(sign(secret, id, timestamp, body));
  return header.split(' ').some((s) => {
    const got = Buffer.from(s);
    return got.length === want.length && timingSafeEqual(got, want);
  });
}

/** A new secret: 32 random bytes. */
export function generateSecret(): string {
  return 'whsec_' + randomBytes(32).toString('base64');
}
