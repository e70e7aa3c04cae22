import { describe, expect, it } from 'vitest';
import { WebhookSecret } from '@memstream/contracts';
import { generateSecret, sign, signedHeaders, verify } from './signing.js';

describe('Standard Webhooks signatures', () => {
  // The test vector published with the Standard Webhooks specification.
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const id = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
  const ts = 1614265330;
  const body = '{"test": 2432232314}';

  it('matches the specification test vector', () => {
    expect(sign(secret, id, ts, body)).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('verifies what it signs, and nothing that was changed', () => {
    const h = signedHeaders(secret, id, ts, body);
    expect(h).toMatchObject({ 'webhook-id': id, 'webhook-timestamp': String(ts), 'content-type': 'application/json' });
    expect(verify(secret, id, ts, body, h['webhook-signature']!)).toBe(true);
    // Several signatures in one header (key rotation): any one matching is enough.
    expect(verify(secret, id, ts, body, `v1,AAAA ${h['webhook-signature']}`)).toBe(true);
    expect(verify(secret, id, ts, body.replace('2432', '2433'), h['webhook-signature']!)).toBe(false);
    expect(verify(secret, id, ts + 1, body, h['webhook-signature']!)).toBe(false);
    expect(verify(generateSecret(), id, ts, body, h['webhook-signature']!)).toBe(false);
  });

  it('generates secrets the registration contract accepts, each different', () => {
    const a = generateSecret();
    expect(WebhookSecret.safeParse(a).success).toBe(true);
    expect(a).not.toBe(generateSecret());
    expect(WebhookSecret.safeParse('whsec_c2hvcnQ=').success).toBe(false);
    expect(WebhookSecret.safeParse('plain-text-secret-of-some-length').success).toBe(false);
  });
});
