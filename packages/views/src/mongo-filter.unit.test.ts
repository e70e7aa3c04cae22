import { describe, expect, it } from 'vitest';
import { Filters, matchesFilter } from '@memstream/contracts';
import type { FilterInput } from '@memstream/contracts';
import type { Document } from 'mongodb';
import { FILTER_CASES, FILTER_FIXTURES } from './contract.js';
import {
  MATCH_NOTHING,
  escapeRegex,
  filterToMongo,
  listQueryToMongo,
  stringifiedCandidates,
  toMetadataEntries,
} from './mongo.js';

const translate = (input: FilterInput) => filterToMongo(Filters.parse(input));

describe('filterToMongo', () => {
  it('metadata: equality on v against every value whose String() is the filter value', () => {
    expect(translate({ AND: [{ key: 'priority', value: '5' }] })).toStrictEqual({
      $and: [{ metadataEntries: { $elemMatch: { k: 'priority', v: { $in: ['5', 5] } } } }],
    });
  });

  it('metadata with ignoreCase compares the lower-cased copy l with the lower-cased value', () => {
    expect(translate({ OR: [{ key: 'flag', value: 'TRUE', ignoreCase: true }] })).toStrictEqual({
      $or: [{ metadataEntries: { $elemMatch: { k: 'flag', l: { $in: ['true', true] } } } }],
    });
  });

  it('a key with dots and a leading $ stays a value, never a field path', () => {
    expect(translate({ AND: [{ key: '$where.x', value: 'a' }] })).toStrictEqual({
      $and: [{ metadataEntries: { $elemMatch: { k: '$where.x', v: { $in: ['a'] } } } }],
    });
  });

  it('numeric: an operator on the precomputed number n', () => {
    expect(translate({ AND: [{ key: 'p', value: '4.5', filterType: 'numeric', numericOperator: '>=' }] })).toStrictEqual({
      $and: [{ metadataEntries: { $elemMatch: { k: 'p', n: { $gte: 4.5 } } } }],
    });
    expect(translate({ AND: [{ key: 'p', value: 3, filterType: 'numeric' }] })).toStrictEqual({
      $and: [{ metadataEntries: { $elemMatch: { k: 'p', n: { $eq: 3 } } } }],
    });
  });

  it('numeric with a non-numeric target matches nothing, and its negation everything', () => {
    expect(translate({ AND: [{ key: 'p', value: 'abc', filterType: 'numeric' }] })).toStrictEqual({ $and: [MATCH_NOTHING] });
    expect(translate({ AND: [{ key: 'p', value: 'abc', filterType: 'numeric', negate: true }] })).toStrictEqual({ $and: [{}] });
  });

  it('array_contains is restricted to arrays, string_contains to strings with an escaped regex', () => {
    expect(translate({ AND: [{ key: 'tags', value: 'A', filterType: 'array_contains', ignoreCase: true }] })).toStrictEqual({
      $and: [{ metadataEntries: { $elemMatch: { k: 'tags', t: 'array', l: { $in: ['a'] } } } }],
    });
    expect(translate({ AND: [{ key: 'title', value: 'a.b*(c)', filterType: 'string_contains' }] })).toStrictEqual({
      $and: [{ metadataEntries: { $elemMatch: { k: 'title', t: 'string', v: { $regex: 'a\\.b\\*\\(c\\)' } } } }],
    });
  });

  it('negate wraps the condition in $nor, so documents without the key match', () => {
    expect(translate({ AND: [{ key: 'c', value: 'x', negate: true }] })).toStrictEqual({
      $and: [{ $nor: [{ metadataEntries: { $elemMatch: { k: 'c', v: { $in: ['x'] } } } }] }],
    });
  });

  it('nests OR inside AND; an empty AND matches all and an empty OR nothing', () => {
    expect(
      translate({
        AND: [{ key: 'a', value: 'x' }, { OR: [{ key: 'b', value: 'true' }, { OR: [] }] }],
      }),
    ).toStrictEqual({
      $and: [
        { metadataEntries: { $elemMatch: { k: 'a', v: { $in: ['x'] } } } },
        { $or: [{ metadataEntries: { $elemMatch: { k: 'b', v: { $in: ['true', true] } } } }, MATCH_NOTHING] },
      ],
    });
    expect(translate({ AND: [] })).toStrictEqual({});
    expect(MATCH_NOTHING).toStrictEqual({ _id: { $in: [] } });
  });
});

describe('listQueryToMongo', () => {
  it('combines tags (any-of), statuses and filter with $and; empty lists add nothing', () => {
    expect(listQueryToMongo({})).toStrictEqual({});
    expect(listQueryToMongo({ containerTags: [], statuses: [] })).toStrictEqual({});
    expect(listQueryToMongo({ containerTags: ['a', 'b'] })).toStrictEqual({ containerTags: { $in: ['a', 'b'] } });
    expect(
      listQueryToMongo({ containerTags: ['a'], statuses: ['done'], filter: Filters.parse({ AND: [{ key: 'k', value: 'v' }] }) }),
    ).toStrictEqual({
      $and: [
        { containerTags: { $in: ['a'] } },
        { status: { $in: ['done'] } },
        { $and: [{ metadataEntries: { $elemMatch: { k: 'k', v: { $in: ['v'] } } } }] },
      ],
    });
  });
});

describe('stringifiedCandidates', () => {
  it('adds the number only for its canonical spelling, and booleans for true/false', () => {
    expect(stringifiedCandidates('5')).toStrictEqual(['5', 5]);
    expect(stringifiedCandidates('5.0')).toStrictEqual(['5.0']);
    expect(stringifiedCandidates('1e+21')).toStrictEqual(['1e+21', 1e21]);
    expect(stringifiedCandidates('-0')).toStrictEqual(['-0']);
    expect(stringifiedCandidates('')).toStrictEqual(['']);
    expect(stringifiedCandidates('Infinity')).toStrictEqual(['Infinity']);
    expect(stringifiedCandidates('false')).toStrictEqual(['false', false]);
  });
});

describe('toMetadataEntries', () => {
  it('records type, lower-cased copy and the number matchesFilter would compare', () => {
    expect(
      toMetadataEntries({ s: 'Ärger', num: 2.5, ns: ' 0x10 ', blank: '  ', b: true, arr: ['X', 'y'], nan: 'abc' }),
    ).toStrictEqual([
      { k: 's', t: 'string', v: 'Ärger', l: 'ärger' },
      { k: 'num', t: 'number', v: 2.5, l: 2.5, n: 2.5 },
      { k: 'ns', t: 'string', v: ' 0x10 ', l: ' 0x10 ', n: 16 },
      { k: 'blank', t: 'string', v: '  ', l: '  ' },
      { k: 'b', t: 'boolean', v: true, l: true },
      { k: 'arr', t: 'array', v: ['X', 'y'], l: ['x', 'y'] },
      { k: 'nan', t: 'string', v: 'abc', l: 'abc' },
    ]);
  });
});

describe('escapeRegex', () => {
  it('escapes every PCRE metacharacter and spells NUL as an escape', () => {
    expect(escapeRegex('^a.b*c+d?e(f)g[h]i{j}k|l$m\\n')).toBe('\\^a\\.b\\*c\\+d\\?e\\(f\\)g\\[h\\]i\\{j\\}k\\|l\\$m\\\\n');
    expect(escapeRegex('a\0b')).toBe('a\\x00b');
    expect(escapeRegex('100% _x_ ü')).toBe('100% _x_ ü');
    for (const s of ['a.b', '(x)', '[^]', '\\d+', 'a|b', '$^']) {
      expect(new RegExp(`^${escapeRegex(s)}$`).test(s)).toBe(true);
    }
  });
});

/*
 * A model of MongoDB's matching for exactly the operators filterToMongo emits, so the translation's
 * semantics are checked against matchesFilter even where no server can run. It encodes the rules
 * the translation relies on: a condition on an array field holds when the array or any element
 * satisfies it, a missing field satisfies nothing, $nor holds when no branch does.
 */
function matches(doc: Document, query: Document): boolean {
  return Object.entries(query).every(([key, cond]) => {
    if (key === '$and') return (cond as Document[]).every((q) => matches(doc, q));
    if (key === '$or') return (cond as Document[]).some((q) => matches(doc, q));
    if (key === '$nor') return !(cond as Document[]).some((q) => matches(doc, q));
    return fieldMatches(doc[key], cond);
  });
}

function fieldMatches(value: unknown, cond: unknown): boolean {
  const isOperatorObject =
    typeof cond === 'object' && cond !== null && !Array.isArray(cond) && Object.keys(cond).every((k) => k.startsWith('$'));
  if (!isOperatorObject) return eachCandidate(value).some((v) => v === cond);
  return Object.entries(cond as Document).every(([op, arg]) => {
    const candidates = eachCandidate(value);
    switch (op) {
      case '$elemMatch':
        return Array.isArray(value) && value.some((el) => typeof el === 'object' && el !== null && matches(el as Document, arg as Document));
      case '$in':
        return (arg as unknown[]).some((a) => candidates.some((v) => v === a));
      case '$regex':
        return candidates.some((v) => typeof v === 'string' && new RegExp(arg as string, 'u').test(v));
      case '$eq':
        return candidates.some((v) => v === arg);
      case '$gt':
        return candidates.some((v) => typeof v === 'number' && v > (arg as number));
      case '$gte':
        return candidates.some((v) => typeof v === 'number' && v >= (arg as number));
      case '$lt':
        return candidates.some((v) => typeof v === 'number' && v < (arg as number));
      case '$lte':
        return candidates.some((v) => typeof v === 'number' && v <= (arg as number));
      default:
        throw new Error(`the model does not know ${op}`);
    }
  });
}

/** The values a field condition is tried against: a missing field none, an array itself and each element. */
function eachCandidate(value: unknown): unknown[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? [value, ...value] : [value];
}

describe('filterToMongo under a model of MongoDB matching agrees with matchesFilter', () => {
  const docs = FILTER_FIXTURES.map(([id, metadata]) => ({ id, metadata, stored: { _id: id, metadataEntries: toMetadataEntries(metadata) } }));
  for (const c of FILTER_CASES) {
    it(c.name, () => {
      const filter = Filters.parse(c.filter);
      const query = filterToMongo(filter);
      const selected = docs.filter((d) => matches(d.stored, query)).map((d) => d.id);
      expect(selected).toStrictEqual(docs.filter((d) => matchesFilter(d.metadata, filter)).map((d) => d.id));
      expect(selected).toStrictEqual(c.expected);
    });
  }
});
