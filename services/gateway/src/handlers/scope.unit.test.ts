import { describe, expect, it } from 'vitest';
import { NotFoundError, PermissionError, ValidationError } from '@memstream/kit';
import { assertOwns, assertTagsInScope, canSee, owns, readTags, writeTags } from './scope.js';

describe('tag scope rules', () => {
  const S = ['a', 'b'];

  it('sees a document with any tag of the scope; owns one with only tags of the scope', () => {
    expect(canSee(S, ['a'])).toBe(true);
    expect(canSee(S, ['a', 'z'])).toBe(true);
    expect(canSee(S, ['z'])).toBe(false);
    expect(canSee(S, [])).toBe(false);
    expect(owns(S, ['a', 'b'])).toBe(true);
    expect(owns(S, ['a', 'z'])).toBe(false);
    expect(owns(S, [])).toBe(false);
    // The admin: everything, untagged documents included.
    expect(canSee(null, [])).toBe(true);
    expect(owns(null, ['z'])).toBe(true);
  });

  it('reads are limited to the scope when no tag is named; naming one outside is 403', () => {
    expect(readTags(S, undefined)).toEqual(['a', 'b']);
    expect(readTags(S, [])).toEqual(['a', 'b']);
    expect(readTags(S, ['b'])).toEqual(['b']);
    expect(() => readTags(S, ['b', 'z'])).toThrow(PermissionError);
    expect(readTags(null, undefined)).toBeUndefined();
    expect(readTags(null, ['z'])).toEqual(['z']);
  });

  it('writes: tags inside the scope; none named gets the only tag, or 400 for several', () => {
    expect(writeTags(['solo'], [])).toEqual(['solo']);
    expect(() => writeTags(S, [])).toThrow(ValidationError);
    expect(writeTags(S, ['a'])).toEqual(['a']);
    expect(() => writeTags(S, ['a', 'z'])).toThrow(PermissionError);
    let err: unknown;
    try {
      assertTagsInScope(S, ['z'], 'containerTag');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PermissionError);
    expect((err as PermissionError).details).toBe(`containerTag: "z" is outside this API key's container tags ("a", "b")`);
    expect(() => assertTagsInScope(null, ['z'])).not.toThrow();
  });

  it('a document the caller cannot see is 404; one it sees but shares with another tag is 403', () => {
    expect(() => assertOwns(S, ['z'], 'x')).toThrow(NotFoundError);
    expect(() => assertOwns(S, ['a', 'z'], 'x')).toThrow(PermissionError);
    expect(() => assertOwns(S, ['a'], 'x')).not.toThrow();
  });
});
