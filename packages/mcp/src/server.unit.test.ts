import { describe, expect, it } from 'vitest';
import { memoryCustomId, wordOverlap, FORGET_MIN_OVERLAP } from './server.js';

describe('add_memory helpers', () => {
  it('derives one customId per (tag, text): the same memory saved twice is one document', () => {
    expect(memoryCustomId('I like tea.', 'me')).toBe(memoryCustomId('  I like tea.\n', 'me'));
    expect(memoryCustomId('I like tea.', 'me')).not.toBe(memoryCustomId('I like tea.', 'you'));
    expect(memoryCustomId('I like tea.', undefined)).toMatch(/^mcp_[A-Za-z0-9_-]{32}$/);
  });

  it('forgets by words in common, not by rank: a similar but different fact is not close enough', () => {
    expect(wordOverlap('project B launch date is the second of june', 'Project B launch date is the second of June.')).toBe(1);
    expect(wordOverlap('Project A launch date is the ninth of March.', 'Project B launch date is the second of June.')).toBe(0.5);
    expect(wordOverlap('Project A launch date is the ninth of March.', 'Project B launch date is the second of June.')).toBeLessThan(FORGET_MIN_OVERLAP);
    expect(wordOverlap('The user prefers green tea', 'the user prefers green tea in the morning')).toBeGreaterThanOrEqual(FORGET_MIN_OVERLAP);
    expect(wordOverlap('', '')).toBe(1);
  });
});
