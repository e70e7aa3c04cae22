import { describe, expect, it } from 'vitest';
import { publishWindowFromEnv } from './publish-window.js';

describe('MEMSTREAM_PUBLISH_WINDOW', () => {
  it('is unset (no window) unless set, takes a positive whole number, and refuses anything else with the variable named', () => {
    expect(publishWindowFromEnv({})).toBeUndefined();
    expect(publishWindowFromEnv({ MEMSTREAM_PUBLISH_WINDOW: '' })).toBeUndefined();
    expect(publishWindowFromEnv({ MEMSTREAM_PUBLISH_WINDOW: '8' })).toBe(8);
    for (const bad of ['0', '-1', '2.5', 'many']) expect(() => publishWindowFromEnv({ MEMSTREAM_PUBLISH_WINDOW: bad })).toThrow(/MEMSTREAM_PUBLISH_WINDOW/);
  });
});
