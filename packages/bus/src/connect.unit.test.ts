import { describe, expect, it } from 'vitest';
import { natsConnectOptions, redactNatsUrl } from './connect.js';

describe('NATS_URL with credentials', () => {
  it('takes user and password out of the URL (nats.js ignores them there)', () => {
    expect(natsConnectOptions('nats://memstream:s3cr%3At@127.0.0.1:4222')).toEqual({ servers: ['nats://127.0.0.1:4222'], user: 'memstream', pass: 's3cr:t' });
  });
  it('a user without a password is a token', () => {
    expect(natsConnectOptions('nats://tok3n@nats:4222')).toEqual({ servers: ['nats://nats:4222'], token: 'tok3n' });
  });
  it('several servers: each is stripped, the first credentials win; none means no auth options', () => {
    expect(natsConnectOptions('nats://a:b@n1:4222, nats://n2:4222')).toEqual({ servers: ['nats://n1:4222', 'nats://n2:4222'], user: 'a', pass: 'b' });
    expect(natsConnectOptions('nats://127.0.0.1:4222')).toEqual({ servers: ['nats://127.0.0.1:4222'] });
    expect(natsConnectOptions('127.0.0.1:4222')).toEqual({ servers: ['127.0.0.1:4222'] });
  });
  it('logs see the URL without its secret', () => {
    expect(redactNatsUrl('nats://memstream:secret@127.0.0.1:4222')).toBe('nats://127.0.0.1:4222');
  });
});
