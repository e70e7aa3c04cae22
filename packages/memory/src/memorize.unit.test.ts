import { describe, expect, it } from 'vitest';
import type { MemoryCandidate } from '@memstream/contracts';
import { applyItemFilters } from './memorize.js';

const c = (memory: string, sourceText: string | null = null): MemoryCandidate => ({ memory, isStatic: false, attribute: null, action: 'remember', eventDates: [], forgetAfter: null, sourceText, updates: [], extends: [] });

describe('the settings’ item filters', () => {
  const all = [c('Ana is allergic to peanuts.'), c('Ana lives in Porto.', 'I live in PORTO'), c('Ana plays chess.')];
  it('excludeItems drops what mentions one; includeItems keeps only what mentions one; none keeps all', () => {
    expect(applyItemFilters(all, { excludeItems: ['Peanut'] }).map((x) => x.memory)).toEqual(['Ana lives in Porto.', 'Ana plays chess.']);
    expect(applyItemFilters(all, { includeItems: ['porto', 'chess'], excludeItems: ['chess'] }).map((x) => x.memory)).toEqual(['Ana lives in Porto.']);
    expect(applyItemFilters(all, undefined)).toBe(all);
  });
});
