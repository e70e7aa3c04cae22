import { describe, expect, it } from 'vitest';
import type { LifecycleEvent } from '@memstream/contracts';
import { PermissionError, ValidationError } from '@memstream/kit';
import { eventFilter, matchesFilter } from './events.js';

const event = (containerTags: string[], status: LifecycleEvent['status'] = 'done'): LifecycleEvent => ({
  id: 'e',
  type: `document.${status}`,
  documentId: 'd',
  customId: null,
  containerTags,
  status,
  revision: 1,
  occurredAt: '2026-01-01T00:00:00.000Z',
});

describe('GET /v3/events filters', () => {
  const scoped = { kind: 'scoped' as const, keyId: 'k', containerTags: ['a', 'b'] };

  it('admin: everything, or the tags and transitions asked for', () => {
    expect(eventFilter({}, { kind: 'admin' })).toEqual({ tags: null, types: null });
    const f = eventFilter({ containerTag: 'x', containerTags: ['y,z', 'x'], events: 'done,failed' }, { kind: 'admin' });
    expect(f).toEqual({ tags: ['x', 'y', 'z'], types: ['done', 'failed'] });
    expect(matchesFilter(event(['z']), f)).toBe(true);
    expect(matchesFilter(event(['q']), f)).toBe(false);
    expect(matchesFilter(event(['x'], 'queued'), f)).toBe(false);
    expect(matchesFilter(event([]), { tags: null, types: null })).toBe(true);
  });

  it('a scoped key sees only its tags, whatever it asks for', () => {
    const f = eventFilter({}, scoped);
    expect(f.tags).toEqual(['a', 'b']);
    expect(matchesFilter(event([]), f)).toBe(false);
    expect(matchesFilter(event(['b', 'c']), f)).toBe(true);
    expect(eventFilter({ containerTag: 'a' }, scoped).tags).toEqual(['a']);
    expect(() => eventFilter({ containerTags: 'a,c' }, scoped)).toThrow(PermissionError);
  });

  it('names a bad tag or transition', () => {
    expect(() => eventFilter({ containerTag: 'bad tag' }, { kind: 'admin' })).toThrow(ValidationError);
    const details = (() => {
      try {
        eventFilter({ events: 'finished' }, { kind: 'admin' });
      } catch (e) {
        return (e as ValidationError).details;
      }
    })();
    expect(details).toMatch(/^events: "finished" is not one of/);
  });
});
