import { describe, expect, it } from 'vitest';
import { LIFECYCLE_TRANSITIONS, type LifecycleEvent, type MemoryLifecycleEvent } from '@memstream/contracts';
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

const memoryEvent = (containerTag: string, type: MemoryLifecycleEvent['type'] = 'memory.created'): MemoryLifecycleEvent => ({
  id: 'm',
  type,
  memoryId: 'mem_abcdefgh',
  containerTag,
  containerTags: [containerTag],
  memory: 'Ana likes tea.',
  version: 1,
  parentMemoryId: null,
  rootMemoryId: null,
  documentId: null,
  cause: 'direct-write',
  occurredAt: '2026-01-01T00:00:00.000Z',
});

describe('GET /v3/events filters', () => {
  const scoped = { kind: 'scoped' as const, keyId: 'k', containerTags: ['a', 'b'] };

  it('admin: everything, or the tags and transitions asked for', () => {
    expect(eventFilter({}, { kind: 'admin' })).toEqual({ tags: null, types: [...LIFECYCLE_TRANSITIONS] });
    const f = eventFilter({ containerTag: 'x', containerTags: ['y,z', 'x'], events: 'done,failed' }, { kind: 'admin' });
    expect(f).toEqual({ tags: ['x', 'y', 'z'], types: ['done', 'failed'] });
    expect(matchesFilter(event(['z']), f)).toBe(true);
    expect(matchesFilter(event(['q']), f)).toBe(false);
    expect(matchesFilter(event(['x'], 'queued'), f)).toBe(false);
    expect(matchesFilter(event([]), eventFilter({}, { kind: 'admin' }))).toBe(true);
  });

  it('memory events only when named, and only of the tags allowed', () => {
    expect(matchesFilter(memoryEvent('a'), eventFilter({}, { kind: 'admin' }))).toBe(false);
    const f = eventFilter({ events: 'done,memory.created,memory.forgotten' }, { kind: 'admin' });
    expect(matchesFilter(memoryEvent('a'), f)).toBe(true);
    expect(matchesFilter(memoryEvent('a', 'memory.updated'), f)).toBe(false);
    expect(matchesFilter(event(['a']), f)).toBe(true);
    const mine = eventFilter({ events: 'memory.created' }, scoped);
    expect(matchesFilter(memoryEvent('b'), mine)).toBe(true);
    expect(matchesFilter(memoryEvent('c'), mine)).toBe(false);
    expect(() => eventFilter({ events: 'memory.linked' }, { kind: 'admin' })).toThrow(ValidationError);
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
