import { describe, expect, it } from 'vitest';
import { natsServerEnv } from './nats-server.js';

describe('natsServerEnv: the embedded nats-server environment', () => {
  it('gives Go one processor on a machine of at most two cores', () => {
    expect(natsServerEnv({ PATH: '/usr/bin' }, 2)).toEqual({ PATH: '/usr/bin', GOMAXPROCS: '1' });
    expect(natsServerEnv({}, 1).GOMAXPROCS).toBe('1');
  });

  it("keeps the caller's GOMAXPROCS, and Go's default on larger machines", () => {
    expect(natsServerEnv({ GOMAXPROCS: '2' }, 2).GOMAXPROCS).toBe('2');
    expect(natsServerEnv({}, 8).GOMAXPROCS).toBeUndefined();
  });
});
