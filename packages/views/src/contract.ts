import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DOCUMENT_STATUSES, Filters, IN_PROGRESS_STATUSES, matchesFilter } from '@memstream/contracts';
import type { DocumentStatus, FilterInput, Metadata } from '@memstream/contracts';
import type { DocumentView, DocumentViews, ListQuery } from './port.js';

/** What a contract run needs from an adapter: a fresh, empty store and a way to dispose of it. */
export interface ContractStore {
  views: DocumentViews;
  /** Close whatever is still open and remove the store's data. */
  cleanup: () => Promise<void>;
  /** Open another connection to the same store (the suite closes it); persistence cases are skipped without it. */
  reopen?: () => Promise<DocumentViews>;
}

const T0 = Date.parse('2024-03-01T00:00:00.000Z');

function at(seconds: number): string {
  return new Date(T0 + seconds * 1000).toISOString();
}

/** A complete document view with neutral defaults; the suite overrides what each case is about. */
function makeView(id: string, overrides: Partial<DocumentView> = {}): DocumentView {
  return {
    id,
    customId: null,
    revision: 1,
    status: 'queued',
    title: null,
    type: 'text',
    content: 'content',
    summary: null,
    url: null,
    filepath: null,
    source: null,
    metadata: {},
    containerTags: [],
    taskType: 'memory',
    contentHash: null,
    error: null,
    chunkCount: 0,
    metadataVersion: 0,
    createdAt: at(0),
    updatedAt: at(0),
    version: 0,
    ...overrides,
  };
}

const FULL_VIEW: DocumentView = makeView('doc_full-1:x', {
  customId: 'cust:1-a_b',
  revision: 3,
  status: 'failed',
  title: 'Ünïcode títle ✓ 😀',
  type: 'webpage',
  content: 'line one\nline two "quoted" \\ backslash \t tab \u0000 nul 😀',
  summary: 'a summary',
  url: 'https://example.com/a?b=c&d=e',
  filepath: '/tmp/some file.txt',
  source: 'crawler',
  metadata: {
    str: 'value',
    int: 42,
    real: 1.5,
    negative: -7,
    yes: true,
    no: false,
    list: ['a', 'B', 'ü'],
    emptyList: [],
    emptyString: '',
    'dotted.key': 'dot',
    $dollar: 'cash',
    'quote"key': 'q',
    'back\\slash': 'bs',
  },
  containerTags: ['user_1', 'proj:2', 'team.a@x'],
  taskType: 'superrag',
  contentHash: 'ab'.repeat(32),
  error: { stage: 'embedding', reason: 'model exploded', class: 'exhausted' },
  chunkCount: 12,
  createdAt: '2024-03-01T10:11:12.345Z',
  updatedAt: '2024-03-02T10:11:12.345Z',
});

const NULL_VIEW: DocumentView = makeView('doc_nulls', {
  content: null,
  metadata: {},
  containerTags: [],
  taskType: 'memory',
});

const EVERYTHING: Omit<ListQuery, 'filter'> = { sort: 'createdAt', order: 'asc', limit: 1000, offset: 0 };

async function ids(views: DocumentViews, query: Partial<ListQuery> = {}): Promise<string[]> {
  const { items } = await views.list({ ...EVERYTHING, ...query });
  return items.map((v) => v.id);
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** Same sequence every run, so failures reproduce; order differs from id order so sorting is really tested. */
function shuffled<T>(xs: readonly T[]): T[] {
  const out = [...xs];
  let seed = 42;
  for (let i = out.length - 1; i > 0; i--) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    const j = seed % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** Metadata fixtures for the filter table: each exercises a corner of `matchesFilter`. */
export const FILTER_FIXTURES: Array<[string, Metadata]> = [
  [
    'f01',
    {
      category: 'news',
      priority: 5,
      tags: ['a', 'B'],
      published: true,
      title: 'Hello World',
      score: '42',
      'dotted.key': 'dot',
      'quote"key': 'q1',
      $dollar: 'cash',
    },
  ],
  ['f02', { category: 'News', priority: '7', tags: ['b', 'c'], published: false, title: 'hello there', score: 'forty' }],
  [
    'f03',
    { category: 'blog', priority: 10.5, tags: [], note: ' 12 ', hex: '0x10', title: 'Regex .* chars (a+b) [x] 100% _under_' },
  ],
  ['f04', {}],
  ['f05', { category: 'ÄRGER', priority: 'high', tags: ['Ärger', 'x'], title: 'Straße Öl', flag: 'TRUE' }],
  ['f06', { category: 'news', priority: -3, published: 'true', count: 0, empty: '', tags: 'a' }],
  ['f07', { priority: 1e21, count: 2.5, score: '1e3', tags: ['5', 'true'], category: ['news', 'blog'] }],
  ['f08', { priority: '  ', count: '-0', tags: ['NEWS'], title: 'news' }],
];
const ALL_FIXTURES = FILTER_FIXTURES.map(([id]) => id);

/** Each case: a filter as the API receives it, and the ids `matchesFilter` selects (asserted too, so the table cannot rot). */
export const FILTER_CASES: Array<{ name: string; filter: FilterInput; expected: string[] }> = [
  { name: 'metadata: exact string, or an array element', filter: { AND: [{ key: 'category', value: 'news' }] }, expected: ['f01', 'f06', 'f07'] },
  { name: 'metadata: case-sensitive by default', filter: { AND: [{ key: 'category', value: 'News' }] }, expected: ['f02'] },
  { name: 'metadata: ignoreCase', filter: { AND: [{ key: 'category', value: 'NEWS', ignoreCase: true }] }, expected: ['f01', 'f02', 'f06', 'f07'] },
  { name: 'metadata: ignoreCase folds non-ASCII letters', filter: { AND: [{ key: 'category', value: 'ärger', ignoreCase: true }] }, expected: ['f05'] },
  {
    name: 'metadata: negate also matches documents without the key',
    filter: { AND: [{ key: 'category', value: 'news', negate: true }] },
    expected: ['f02', 'f03', 'f04', 'f05', 'f08'],
  },
  { name: 'metadata: array value matches when any element equals', filter: { AND: [{ key: 'tags', value: 'b' }] }, expected: ['f02'] },
  { name: 'metadata: array value with ignoreCase', filter: { AND: [{ key: 'tags', value: 'b', ignoreCase: 'true' }] }, expected: ['f01', 'f02'] },
  { name: 'metadata: array elements compared as strings', filter: { AND: [{ key: 'tags', value: 'true' }] }, expected: ['f07'] },
  { name: 'metadata: a number equals its String()', filter: { AND: [{ key: 'priority', value: '5' }] }, expected: ['f01'] },
  { name: 'metadata: another spelling of the number does not', filter: { AND: [{ key: 'priority', value: '5.0' }] }, expected: [] },
  { name: 'metadata: a large number as String() spells it', filter: { AND: [{ key: 'priority', value: '1e+21' }] }, expected: ['f07'] },
  { name: 'metadata: zero, but not the string "-0"', filter: { AND: [{ key: 'count', value: 0 }] }, expected: ['f06'] },
  { name: 'metadata: true matches a boolean and the string', filter: { AND: [{ key: 'published', value: 'true' }] }, expected: ['f01', 'f06'] },
  { name: 'metadata: false as a boolean filter value', filter: { AND: [{ key: 'published', value: false }] }, expected: ['f02'] },
  { name: 'metadata: TRUE with ignoreCase matches a boolean', filter: { AND: [{ key: 'published', value: 'TRUE', ignoreCase: true }] }, expected: ['f01', 'f06'] },
  { name: 'metadata: TRUE without ignoreCase matches only that string', filter: { AND: [{ key: 'flag', value: 'TRUE' }] }, expected: ['f05'] },
  {
    name: 'numeric: > over numbers and numeric strings, excluding the boundary',
    filter: { AND: [{ key: 'priority', value: '5', filterType: 'numeric', numericOperator: '>' }] },
    expected: ['f02', 'f03', 'f07'],
  },
  {
    name: 'numeric: <=',
    filter: { AND: [{ key: 'priority', value: 5, filterType: 'numeric', numericOperator: '<=' }] },
    expected: ['f01', 'f06'],
  },
  { name: 'numeric: = on a numeric string', filter: { AND: [{ key: 'priority', value: '7', filterType: 'numeric' }] }, expected: ['f02'] },
  {
    name: 'numeric: < excludes the boundary',
    filter: { AND: [{ key: 'priority', value: '5', filterType: 'numeric', numericOperator: '<' }] },
    expected: ['f06'],
  },
  { name: 'numeric: a string with surrounding spaces parses', filter: { AND: [{ key: 'note', value: '12', filterType: 'numeric' }] }, expected: ['f03'] },
  { name: 'numeric: a hex string parses as Number() does', filter: { AND: [{ key: 'hex', value: '16', filterType: 'numeric' }] }, expected: ['f03'] },
  {
    name: 'numeric: a scientific-notation string parses',
    filter: { AND: [{ key: 'score', value: '1000', filterType: 'numeric', numericOperator: '>=' }] },
    expected: ['f07'],
  },
  { name: 'numeric: "-0" equals 0', filter: { AND: [{ key: 'count', value: '0', filterType: 'numeric' }] }, expected: ['f06', 'f08'] },
  { name: 'numeric: an empty target is 0, as Number("") is', filter: { AND: [{ key: 'count', value: '', filterType: 'numeric' }] }, expected: ['f06', 'f08'] },
  {
    name: 'numeric: a blank string is not a number',
    filter: { AND: [{ key: 'empty', value: '0', filterType: 'numeric', numericOperator: '>=' }] },
    expected: [],
  },
  {
    name: 'numeric: negate matches missing keys and non-numbers',
    filter: { AND: [{ key: 'priority', value: '5', filterType: 'numeric', numericOperator: '>=', negate: true }] },
    expected: ['f04', 'f05', 'f06', 'f08'],
  },
  {
    name: 'numeric: booleans are not numbers',
    filter: { AND: [{ key: 'published', value: '0', filterType: 'numeric', numericOperator: '>=' }] },
    expected: [],
  },
  { name: 'numeric: a non-numeric target matches nothing', filter: { AND: [{ key: 'score', value: 'abc', filterType: 'numeric' }] }, expected: [] },
  {
    name: 'numeric: a negated non-numeric target matches everything',
    filter: { AND: [{ key: 'score', value: 'abc', filterType: 'numeric', negate: true }] },
    expected: ALL_FIXTURES,
  },
  { name: 'array_contains: an element', filter: { AND: [{ key: 'tags', value: 'a', filterType: 'array_contains' }] }, expected: ['f01'] },
  {
    name: 'array_contains: ignoreCase',
    filter: { AND: [{ key: 'tags', value: 'B', filterType: 'array_contains', ignoreCase: true }] },
    expected: ['f01', 'f02'],
  },
  {
    name: 'array_contains: ignoreCase folds non-ASCII letters',
    filter: { AND: [{ key: 'tags', value: 'ärger', filterType: 'array_contains', ignoreCase: true }] },
    expected: ['f05'],
  },
  {
    name: 'array_contains: never matches a scalar',
    filter: { AND: [{ key: 'category', value: 'news', filterType: 'array_contains' }] },
    expected: ['f07'],
  },
  { name: 'array_contains: elements compared as strings', filter: { AND: [{ key: 'tags', value: 5, filterType: 'array_contains' }] }, expected: ['f07'] },
  { name: 'string_contains: case-sensitive by default', filter: { AND: [{ key: 'title', value: 'hello', filterType: 'string_contains' }] }, expected: ['f02'] },
  {
    name: 'string_contains: ignoreCase',
    filter: { AND: [{ key: 'title', value: 'HELLO', filterType: 'string_contains', ignoreCase: true }] },
    expected: ['f01', 'f02'],
  },
  {
    name: 'string_contains: ignoreCase folds non-ASCII letters',
    filter: { AND: [{ key: 'title', value: 'ßE öL', filterType: 'string_contains', ignoreCase: true }] },
    expected: ['f05'],
  },
  {
    name: 'string_contains: lower-casing is not case folding (ß is not ss)',
    filter: { AND: [{ key: 'title', value: 'STRASSE', filterType: 'string_contains', ignoreCase: true }] },
    expected: [],
  },
  { name: 'string_contains: only strings, never arrays', filter: { AND: [{ key: 'tags', value: 'a', filterType: 'string_contains' }] }, expected: ['f06'] },
  { name: 'string_contains: regex characters are literal', filter: { AND: [{ key: 'title', value: '.*', filterType: 'string_contains' }] }, expected: ['f03'] },
  {
    name: 'string_contains: regex groups and classes are literal',
    filter: { AND: [{ key: 'title', value: '(a+b) [x]', filterType: 'string_contains' }] },
    expected: ['f03'],
  },
  { name: 'string_contains: LIKE wildcards are literal', filter: { OR: [{ key: 'title', value: '%', filterType: 'string_contains' }, { key: 'title', value: '_', filterType: 'string_contains' }] }, expected: ['f03'] },
  {
    name: 'string_contains: an empty needle matches every string value',
    filter: { AND: [{ key: 'title', value: '', filterType: 'string_contains' }] },
    expected: ['f01', 'f02', 'f03', 'f05', 'f08'],
  },
  {
    name: 'nested: OR inside AND',
    filter: {
      AND: [
        { key: 'category', value: 'NEWS', ignoreCase: true },
        { OR: [{ key: 'priority', value: '6', filterType: 'numeric', numericOperator: '>' }, { key: 'tags', value: 'a', filterType: 'array_contains' }] },
      ],
    },
    expected: ['f01', 'f02', 'f07'],
  },
  {
    name: 'nested: AND with a negation inside OR',
    filter: {
      OR: [{ AND: [{ key: 'published', value: 'true' }, { key: 'priority', value: '5', negate: true }] }, { key: 'title', value: 'news' }],
    },
    expected: ['f06', 'f08'],
  },
  { name: 'missing key never matches', filter: { AND: [{ key: 'nonexistent', value: 'x' }] }, expected: [] },
  { name: 'negated missing key always matches', filter: { AND: [{ key: 'nonexistent', value: 'x', negate: true }] }, expected: ALL_FIXTURES },
  {
    name: 'keys with dots, quotes and $ are matched literally',
    filter: { AND: [{ key: 'dotted.key', value: 'dot' }, { key: 'quote"key', value: 'q1' }, { key: '$dollar', value: 'cash' }] },
    expected: ['f01'],
  },
  { name: 'a dotted key is not a path', filter: { AND: [{ key: 'dotted', value: 'dot' }] }, expected: [] },
  { name: 'an empty AND matches everything', filter: { AND: [] }, expected: ALL_FIXTURES },
  { name: 'an empty OR matches nothing', filter: { OR: [] }, expected: [] },
];

/**
 * The shared DocumentViews contract: every adapter must pass it unchanged.
 * `open` must return a fresh, empty store each time it is called.
 */
export function describeDocumentViewsContract(name: string, open: () => Promise<ContractStore>): void {
  describe(`DocumentViews contract: ${name}`, () => {
    let store: ContractStore;
    let views: DocumentViews;

    beforeEach(async () => {
      store = await open();
      views = store.views;
    });
    afterEach(async () => {
      await store.cleanup();
    });

    it('get of an unknown id is null', async () => {
      expect(await views.get('nope')).toBeNull();
    });

    it('getMany gives each id its view, in order, null where there is none, the same as get', async () => {
      await views.put(FULL_VIEW, 0);
      await views.put(NULL_VIEW, 0);
      expect(await views.getMany([])).toStrictEqual([]);
      const got = await views.getMany(['nope', NULL_VIEW.id, FULL_VIEW.id, NULL_VIEW.id]);
      expect(got).toStrictEqual([null, { ...NULL_VIEW, version: 1 }, { ...FULL_VIEW, version: 1 }, { ...NULL_VIEW, version: 1 }]);
      // Each position its own object: changing one changes neither the other nor the store.
      got[1]!.containerTags.push('changed');
      expect(got[3]).toStrictEqual({ ...NULL_VIEW, version: 1 });
      expect(await views.getMany([NULL_VIEW.id])).toStrictEqual([await views.get(NULL_VIEW.id)]);
    });

    it('put(…, 0) then get round-trips every field, with version 1', async () => {
      expect(await views.put(FULL_VIEW, 0)).toBe(true);
      expect(await views.put(NULL_VIEW, 0)).toBe(true);
      expect(await views.get(FULL_VIEW.id)).toStrictEqual({ ...FULL_VIEW, version: 1 });
      expect(await views.get(NULL_VIEW.id)).toStrictEqual({ ...NULL_VIEW, version: 1 });
    });

    it('list returns the same full records as get', async () => {
      await views.put(FULL_VIEW, 0);
      await views.put(NULL_VIEW, 0);
      const { items, total } = await views.list(EVERYTHING);
      expect(total).toBe(2);
      expect(items).toStrictEqual([
        { ...NULL_VIEW, version: 1 },
        { ...FULL_VIEW, version: 1 },
      ]);
    });

    it('the stored version is expectedVersion + 1 whatever version the view carries', async () => {
      expect(await views.put(makeView('d1', { version: 99 }), 0)).toBe(true);
      expect((await views.get('d1'))?.version).toBe(1);
      expect(await views.put(makeView('d1', { version: 7, revision: 2 }), 1)).toBe(true);
      expect(await views.get('d1')).toStrictEqual(makeView('d1', { version: 2, revision: 2 }));
    });

    it('put(…, 0) on an existing document returns false and changes nothing', async () => {
      const original = makeView('d1', { title: 'first' });
      expect(await views.put(original, 0)).toBe(true);
      expect(await views.put(makeView('d1', { title: 'second' }), 0)).toBe(false);
      expect(await views.get('d1')).toStrictEqual({ ...original, version: 1 });
    });

    it('put with a stale expectedVersion returns false and changes nothing', async () => {
      await views.put(makeView('d1', { title: 'v1' }), 0);
      const v2 = makeView('d1', { title: 'v2', revision: 2, status: 'chunking', metadata: { k: 'v' } });
      expect(await views.put(v2, 1)).toBe(true);
      expect(await views.put(makeView('d1', { title: 'stale' }), 1)).toBe(false);
      expect(await views.put(makeView('d1', { title: 'future' }), 3)).toBe(false);
      expect(await views.get('d1')).toStrictEqual({ ...v2, version: 2 });
      expect(await views.countByStatus()).toMatchObject({ chunking: 1, queued: 0 });
    });

    it('put with a non-zero expectedVersion on a missing document returns false and creates nothing', async () => {
      expect(await views.put(makeView('ghost'), 1)).toBe(false);
      expect(await views.get('ghost')).toBeNull();
      expect((await views.list(EVERYTHING)).total).toBe(0);
    });

    it('two concurrent puts with the same expectedVersion: exactly one wins', async () => {
      const inserts = await Promise.all([
        views.put(makeView('d1', { title: 'insert A' }), 0),
        views.put(makeView('d1', { title: 'insert B' }), 0),
      ]);
      expect(inserts.filter(Boolean)).toHaveLength(1);
      const afterInsert = await views.get('d1');
      expect(afterInsert?.title).toBe(inserts[0] ? 'insert A' : 'insert B');
      expect(afterInsert?.version).toBe(1);

      const updates = await Promise.all([
        views.put(makeView('d1', { title: 'update A' }), 1),
        views.put(makeView('d1', { title: 'update B' }), 1),
      ]);
      expect(updates.filter(Boolean)).toHaveLength(1);
      expect(await views.get('d1')).toStrictEqual(makeView('d1', { title: updates[0] ? 'update A' : 'update B', version: 2 }));
    });

    it('two connections to the same store: writes are visible across them and CAS holds between them', async (ctx) => {
      if (!store.reopen) return ctx.skip();
      const other = await store.reopen();
      try {
        await views.put(makeView('d1', { title: 'one' }), 0);
        expect((await other.get('d1'))?.title).toBe('one');
        const results = await Promise.all([
          views.put(makeView('d1', { title: 'from first' }), 1),
          other.put(makeView('d1', { title: 'from second' }), 1),
        ]);
        expect(results.filter(Boolean)).toHaveLength(1);
        const winner = results[0] ? 'from first' : 'from second';
        expect(await views.get('d1')).toStrictEqual(makeView('d1', { title: winner, version: 2 }));
        expect(await other.get('d1')).toStrictEqual(makeView('d1', { title: winner, version: 2 }));
        expect(await other.put(makeView('d1', { title: 'late' }), 1)).toBe(false);
      } finally {
        await other.close();
      }
    });

    it('the next get sees what another connection wrote, deleted, or wrote again after a delete', async (ctx) => {
      if (!store.reopen) return ctx.skip();
      const other = await store.reopen();
      try {
        await views.put(makeView('d1', { title: 'one', content: 'first text' }), 0);
        expect((await views.get('d1'))?.title).toBe('one');
        expect(await other.put(makeView('d1', { title: 'two', status: 'chunking', content: 'second text' }), 1)).toBe(true);
        expect(await views.get('d1')).toStrictEqual(makeView('d1', { title: 'two', status: 'chunking', content: 'second text', version: 2 }));
        expect(await other.delete('d1')).toBe(true);
        expect(await views.get('d1')).toBeNull();
        // Written again at the version it had before: the same version number, another document.
        expect(await other.put(makeView('d1', { title: 'three', revision: 2, content: null }), 0)).toBe(true);
        expect(await other.put(makeView('d1', { title: 'four', revision: 2, content: 'fourth text' }), 1)).toBe(true);
        expect(await views.get('d1')).toStrictEqual(makeView('d1', { title: 'four', revision: 2, content: 'fourth text', version: 2 }));
        expect(await views.put(makeView('d1', { title: 'five', revision: 2 }), 2)).toBe(true);
        expect(await other.get('d1')).toStrictEqual(makeView('d1', { title: 'five', revision: 2, version: 3 }));
      } finally {
        await other.close();
      }
    });

    it('a view given to put or returned by get can be changed by the caller without changing the store', async () => {
      const view = makeView('d1', { metadata: { k: 'v', list: ['a'] }, containerTags: ['t1'], error: { stage: 'chunking', reason: 'r', class: 'poison' } });
      await views.put(view, 0);
      view.title = 'changed after put';
      view.metadata.k = 'changed';
      (view.metadata.list as string[]).push('b');
      view.containerTags.push('t2');
      view.error!.reason = 'changed';
      const stored = makeView('d1', { metadata: { k: 'v', list: ['a'] }, containerTags: ['t1'], error: { stage: 'chunking', reason: 'r', class: 'poison' }, version: 1 });
      const got = await views.get('d1');
      expect(got).toStrictEqual(stored);
      got!.status = 'done';
      got!.metadata.k = 'changed';
      (got!.metadata.list as string[]).push('c');
      got!.containerTags.push('t3');
      got!.error!.reason = 'changed';
      expect(await views.get('d1')).toStrictEqual(stored);
      expect((await views.list(EVERYTHING)).items).toStrictEqual([stored]);
    });

    it('each field, the content included, follows every write: changed, set to null, set again', async () => {
      const steps: Array<Partial<DocumentView>> = [
        { content: 'text one', title: 'a', metadata: { k: 1 }, containerTags: ['t1'] },
        { content: 'text one', title: 'b', status: 'extracting' },
        { content: 'text two \u0000 😀', status: 'extracting', revision: 2, customId: 'c1' },
        { content: null, status: 'failed', error: { stage: 'extracting', reason: 'no text', class: 'permanent' } },
        { content: null, status: 'failed', error: { stage: 'extracting', reason: 'no text', class: 'permanent' }, metadata: { k: 2 }, metadataVersion: 1 },
        { content: 'text three', revision: 3, createdAt: at(-5), updatedAt: at(9), containerTags: [] },
        { content: 'text three', revision: 3, status: 'done', chunkCount: 4, summary: 's', url: 'https://x', filepath: '/p', source: 'src', type: 'webpage' },
      ];
      for (const [i, step] of steps.entries()) {
        expect(await views.put(makeView('d1', step), i), `step ${i}`).toBe(true);
        expect(await views.get('d1'), `step ${i}`).toStrictEqual(makeView('d1', { ...step, version: i + 1 }));
        expect((await views.list(EVERYTHING)).items, `step ${i}`).toStrictEqual([makeView('d1', { ...step, version: i + 1 })]);
      }
      if (store.reopen) {
        const reopened = await store.reopen();
        try {
          expect(await reopened.get('d1')).toStrictEqual(makeView('d1', { ...steps.at(-1), version: steps.length }));
        } finally {
          await reopened.close();
        }
      }
    });

    it('delete returns true, then false; the id can be inserted again', async () => {
      await views.put(makeView('d1'), 0);
      await views.put(makeView('d2'), 0);
      expect(await views.delete('d1')).toBe(true);
      expect(await views.get('d1')).toBeNull();
      expect(await views.delete('d1')).toBe(false);
      expect(await views.delete('never-existed')).toBe(false);
      expect(await ids(views)).toStrictEqual(['d2']);
      expect(await views.put(makeView('d1', { title: 'again' }), 0)).toBe(true);
      expect(await views.get('d1')).toStrictEqual(makeView('d1', { title: 'again', version: 1 }));
    });

    it('writeMany: each write is its own compare-and-set, one result per write in order', async () => {
      await views.put(makeView('d1', { title: 'one' }), 0);
      await views.put(makeView('d2'), 0);
      await views.put(makeView('d3'), 0);
      const results = await views.writeMany([
        { id: 'd1', view: makeView('d1', { title: 'two', revision: 2 }), expectedVersion: 1 },
        { id: 'd2', view: makeView('d2', { title: 'lost' }), expectedVersion: 5 },
        { id: 'd4', view: makeView('d4', { title: 'new' }), expectedVersion: 0 },
        { id: 'd3', view: null, expectedVersion: 1 },
        { id: 'd2', view: null, expectedVersion: 7 },
      ]);
      expect(results).toStrictEqual([true, false, true, true, false]);
      expect(await views.get('d1')).toStrictEqual(makeView('d1', { title: 'two', revision: 2, version: 2 }));
      expect(await views.get('d2')).toStrictEqual(makeView('d2', { version: 1 }));
      expect(await views.get('d3')).toBeNull();
      expect(await views.get('d4')).toStrictEqual(makeView('d4', { title: 'new', version: 1 }));
      expect(await views.writeMany([])).toStrictEqual([]);
    });

    describe('list paging and ordering', () => {
      // [id, createdAt second, updatedAt second]; b and d share a createdAt to exercise the id tie-break.
      const rows: Array<[string, number, number]> = [
        ['a', 1, 5],
        ['b', 3, 1],
        ['c', 2, 7],
        ['d', 3, 2],
        ['e', 5, 3],
        ['f', 4, 6],
        ['g', 0, 4],
      ];

      beforeEach(async () => {
        for (const [id, created, updated] of shuffled(rows)) {
          expect(await views.put(makeView(id, { createdAt: at(created), updatedAt: at(updated) }), 0)).toBe(true);
        }
      });

      it('sorts by createdAt or updatedAt, ascending or descending, ties broken by id', async () => {
        expect(await ids(views, { sort: 'createdAt', order: 'asc' })).toStrictEqual(['g', 'a', 'c', 'b', 'd', 'f', 'e']);
        expect(await ids(views, { sort: 'createdAt', order: 'desc' })).toStrictEqual(['e', 'f', 'd', 'b', 'c', 'a', 'g']);
        expect(await ids(views, { sort: 'updatedAt', order: 'asc' })).toStrictEqual(['b', 'd', 'e', 'g', 'a', 'f', 'c']);
        expect(await ids(views, { sort: 'updatedAt', order: 'desc' })).toStrictEqual(['c', 'f', 'a', 'g', 'e', 'd', 'b']);
      });

      it('pages with limit and offset; total counts every match', async () => {
        const page = (offset: number, limit: number) => views.list({ sort: 'createdAt', order: 'asc', limit, offset });
        const pages = await Promise.all([page(0, 3), page(3, 3), page(6, 3), page(7, 3), page(100, 3)]);
        expect(pages.map((p) => p.items.map((v) => v.id))).toStrictEqual([['g', 'a', 'c'], ['b', 'd', 'f'], ['e'], [], []]);
        expect(pages.map((p) => p.total)).toStrictEqual([7, 7, 7, 7, 7]);
        const desc = await views.list({ sort: 'updatedAt', order: 'desc', limit: 2, offset: 1 });
        expect(desc).toMatchObject({ total: 7, items: [{ id: 'f' }, { id: 'a' }] });
      });

      it('limit 0 returns no items but the full total', async () => {
        const result = await views.list({ sort: 'createdAt', order: 'asc', limit: 0, offset: 0 });
        expect(result).toStrictEqual({ items: [], total: 7 });
      });
    });

    describe('list selection', () => {
      beforeEach(async () => {
        const docs: Array<[string, string[], DocumentStatus]> = [
          ['t1', ['alpha'], 'queued'],
          ['t2', ['beta'], 'done'],
          ['t3', ['alpha', 'beta'], 'failed'],
          ['t4', [], 'done'],
          ['t5', ['gamma'], 'embedding'],
          ['t6', ['alpha.beta'], 'done'],
          ['t7', ['ALPHA'], 'queued'],
        ];
        for (const [i, [id, containerTags, status]] of docs.entries()) {
          const metadata: Metadata = { n: i, kind: i % 2 === 0 ? 'even' : 'odd' };
          await views.put(makeView(id, { containerTags, status, metadata, createdAt: at(i) }), 0);
        }
      });

      it('containerTags: a document matches when it has any of the tags, compared exactly', async () => {
        expect(await ids(views, { containerTags: ['alpha'] })).toStrictEqual(['t1', 't3']);
        expect(await ids(views, { containerTags: ['beta'] })).toStrictEqual(['t2', 't3']);
        expect(await ids(views, { containerTags: ['alpha', 'gamma'] })).toStrictEqual(['t1', 't3', 't5']);
        expect(await ids(views, { containerTags: ['alpha.beta'] })).toStrictEqual(['t6']);
        expect(await ids(views, { containerTags: ['nope'] })).toStrictEqual([]);
      });

      it('containerTags and statuses: absent or empty means no restriction', async () => {
        const all = ['t1', 't2', 't3', 't4', 't5', 't6', 't7'];
        expect(await ids(views, {})).toStrictEqual(all);
        expect(await ids(views, { containerTags: [] })).toStrictEqual(all);
        expect(await ids(views, { statuses: [] })).toStrictEqual(all);
      });

      it('statuses: a document matches when its status is one of them', async () => {
        expect(await ids(views, { statuses: ['done'] })).toStrictEqual(['t2', 't4', 't6']);
        expect(await ids(views, { statuses: ['done', 'failed'] })).toStrictEqual(['t2', 't3', 't4', 't6']);
        expect(await ids(views, { statuses: ['extracting'] })).toStrictEqual([]);
      });

      it('tags, statuses and filter combine with AND, and total follows them', async () => {
        const filter = Filters.parse({ AND: [{ key: 'kind', value: 'even' }] });
        const result = await views.list({
          ...EVERYTHING,
          containerTags: ['alpha', 'beta', 'alpha.beta'],
          statuses: ['done', 'failed'],
          filter,
          limit: 1,
        });
        // t3 (index 2) and t6 (index 5, odd) carry a tag and a status; only t3 is even. t2 (index 1) is odd.
        expect(result.total).toBe(1);
        expect(result.items.map((v) => v.id)).toStrictEqual(['t3']);
        const numeric = Filters.parse({ AND: [{ key: 'n', value: '3', filterType: 'numeric', numericOperator: '>=' }] });
        expect(await ids(views, { statuses: ['done'], filter: numeric, order: 'desc' })).toStrictEqual(['t6', 't4']);
      });

      it('countByTag counts the documents in the given statuses under each tag they carry', async () => {
        // t1 alpha queued, t2 beta done, t3 alpha+beta failed, t4 (no tag) done, t5 gamma embedding, t6 alpha.beta done, t7 ALPHA queued.
        expect(await views.countByTag(['queued', 'failed'])).toStrictEqual(new Map([['alpha', 2], ['beta', 1], ['ALPHA', 1]]));
        expect(await views.countByTag(['done'])).toStrictEqual(new Map([['beta', 1], ['alpha.beta', 1]]));
        expect(await views.countByTag(['done', 'done'])).toStrictEqual(new Map([['beta', 1], ['alpha.beta', 1]]));
        expect(await views.countByTag(['extracting'])).toStrictEqual(new Map());
        expect(await views.countByTag([])).toStrictEqual(new Map());
      });

      it('countByTag reads past its pages: a backlog of 2,500 documents over three tags', async () => {
        const writes = Array.from({ length: 2500 }, (_, i) => ({
          id: `bulk${String(i).padStart(4, '0')}`,
          // Equal creation times in runs of 7: the pages' keyset must order by id after the time.
          view: makeView(`bulk${String(i).padStart(4, '0')}`, { containerTags: i % 5 === 0 ? ['big', 'small'] : ['big'], status: i % 2 ? 'queued' : 'chunking', createdAt: at(1000 + Math.floor(i / 7)) }),
          expectedVersion: 0,
        }));
        expect((await views.writeMany(writes)).every(Boolean)).toBe(true);
        const counts = await views.countByTag(IN_PROGRESS_STATUSES);
        expect(counts.get('big')).toBe(2500);
        expect(counts.get('small')).toBe(500);
        // The fixture's own: t1 and t7 queued, t5 embedding.
        expect([counts.get('alpha'), counts.get('ALPHA'), counts.get('gamma')]).toStrictEqual([1, 1, 1]);
        expect((await views.countByTag(['queued'])).get('big')).toBe(1250);
      });

      it('counts by tag and status follow every write: new views, status and tag changes, lost compare-and-sets, deletes', async () => {
        // A model of the store beside it; after every step each selection by tags (and statuses)
        // is counted both ways and compared with the model. Seeded: the same steps every run.
        let seed = 14;
        // mulberry32: 32-bit integer arithmetic throughout (Math.imul), so every residue comes up.
        const rnd = (n: number) => {
          seed = (seed + 0x6d2b79f5) | 0;
          let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
          t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
          return ((t ^ (t >>> 14)) >>> 0) % n;
        };
        const TAGS = ['alpha', 'beta', 'gamma', 'delta'];
        const model = new Map<string, DocumentView>();
        for (const id of ['t1', 't2', 't3', 't4', 't5', 't6', 't7']) model.set(id, (await views.get(id))!);
        const someTags = () => (rnd(6) === 0 ? ['alpha', 'alpha'] : TAGS.filter(() => rnd(3) === 0));
        const someStatus = () => DOCUMENT_STATUSES[rnd(DOCUMENT_STATUSES.length)]!;
        const deleted: string[] = [];
        const unfinished: DocumentStatus[] = IN_PROGRESS_STATUSES;
        for (let step = 0; step < 160; step++) {
          const known = [...model.keys()];
          // Now and then a deleted id comes back (a store must not keep anything of what it deleted).
          const id = rnd(4) === 0 || known.length === 0 ? (deleted.length > 0 && rnd(2) ? deleted.pop()! : `n${step}`) : known[rnd(known.length)]!;
          const current = model.get(id);
          const op = rnd(10);
          if (!current) {
            const v = makeView(id, { containerTags: someTags(), status: someStatus(), createdAt: at(100 + step) });
            expect(await views.put(v, 0)).toBe(true);
            model.set(id, { ...v, version: 1 });
          } else if (op < 6) {
            const next = { ...current, ...(rnd(2) ? { status: someStatus() } : {}), ...(rnd(2) ? { containerTags: someTags() } : {}) };
            expect(await views.put(next, current.version)).toBe(true);
            model.set(id, { ...next, version: current.version + 1 });
          } else if (op < 7) {
            expect(await views.put({ ...current, status: someStatus(), containerTags: someTags() }, current.version + 5)).toBe(false);
          } else if (op < 8) {
            expect(await views.writeMany([{ id, view: null, expectedVersion: current.version }])).toStrictEqual([true]);
            model.delete(id);
            deleted.push(id);
          } else {
            expect(await views.delete(id)).toBe(true);
            model.delete(id);
            deleted.push(id);
          }
          const selections: Array<{ containerTags: string[]; statuses?: DocumentStatus[] }> = [
            { containerTags: [TAGS[rnd(4)]!] },
            { containerTags: [TAGS[rnd(4)]!, TAGS[rnd(4)]!] },
            { containerTags: [TAGS[rnd(4)]!], statuses: [someStatus(), someStatus()] },
            // What the gateway's lanes ask: a tag's unfinished documents.
            { containerTags: [TAGS[rnd(4)]!], statuses: unfinished },
            { containerTags: [TAGS[rnd(4)]!, TAGS[rnd(4)]!], statuses: [unfinished[rnd(4)]!] },
          ];
          for (const sel of selections) {
            const expected = [...model.values()].filter(
              (v) => v.containerTags.some((t) => sel.containerTags.includes(t)) && (!sel.statuses || sel.statuses.includes(v.status)),
            ).length;
            const where = `step ${step}, ${JSON.stringify(sel)}`;
            expect((await views.list({ ...EVERYTHING, ...sel, limit: 1 })).total, where).toBe(expected);
          }
          // What the gateway's lanes read: every tag's unfinished documents, and some other statuses'.
          for (const statuses of [unfinished, [someStatus(), someStatus()]]) {
            const expected = new Map<string, number>();
            for (const v of model.values()) {
              if (!statuses.includes(v.status)) continue;
              for (const t of new Set(v.containerTags)) expected.set(t, (expected.get(t) ?? 0) + 1);
            }
            expect(await views.countByTag(statuses), `step ${step}, ${JSON.stringify(statuses)}`).toStrictEqual(expected);
          }
        }
      });

      it('countByStatus counts every status, zeros included', async () => {
        expect(await views.countByStatus()).toStrictEqual({ queued: 2, extracting: 0, chunking: 0, embedding: 1, done: 3, failed: 1 });
        await views.delete('t2');
        await views.put(makeView('t5', { status: 'done', containerTags: ['gamma'], createdAt: at(4) }), 1);
        expect(await views.countByStatus()).toStrictEqual({ queued: 2, extracting: 0, chunking: 0, embedding: 0, done: 3, failed: 1 });
      });
    });

    it('countByStatus on an empty store is all zeros', async () => {
      const counts = await views.countByStatus();
      expect(Object.keys(counts).sort()).toStrictEqual([...DOCUMENT_STATUSES].sort());
      expect(Object.values(counts)).toStrictEqual([0, 0, 0, 0, 0, 0]);
    });

    it('all() yields every document in id order, across several pages', async () => {
      expect(await collect(views.all())).toStrictEqual([]);
      const expectedIds = Array.from({ length: 250 }, (_, i) => `doc-${String(i).padStart(4, '0')}`);
      for (const id of shuffled(expectedIds)) {
        await views.put(makeView(id, { metadata: { id }, containerTags: [id] }), 0);
      }
      const all = await collect(views.all());
      expect(all.map((v) => v.id)).toStrictEqual(expectedIds);
      expect(all[137]).toStrictEqual(makeView('doc-0137', { metadata: { id: 'doc-0137' }, containerTags: ['doc-0137'], version: 1 }));
    });

    it('all() can be abandoned early and the store keeps working', async () => {
      for (let i = 0; i < 120; i++) await views.put(makeView(`x${String(i).padStart(3, '0')}`), 0);
      const first: string[] = [];
      for await (const v of views.all()) {
        first.push(v.id);
        if (first.length === 3) break;
      }
      expect(first).toStrictEqual(['x000', 'x001', 'x002']);
      expect((await views.list(EVERYTHING)).total).toBe(120);
      expect((await collect(views.all())).length).toBe(120);
    });

    it('ping resolves while open and rejects after close', async () => {
      await expect(views.ping()).resolves.toBeUndefined();
      await views.close();
      await expect(views.ping()).rejects.toThrow();
    });

    it('data persists across close and reopen', async (ctx) => {
      if (!store.reopen) return ctx.skip();
      await views.put(FULL_VIEW, 0);
      await views.put(makeView('d1', { title: 'v1' }), 0);
      await views.put(makeView('d1', { title: 'v2', status: 'done' }), 1);
      await views.put(makeView('gone'), 0);
      await views.delete('gone');
      await views.close();

      const reopened = await store.reopen();
      try {
        expect(await reopened.get(FULL_VIEW.id)).toStrictEqual({ ...FULL_VIEW, version: 1 });
        expect(await reopened.get('d1')).toStrictEqual(makeView('d1', { title: 'v2', status: 'done', version: 2 }));
        expect(await reopened.get('gone')).toBeNull();
        expect(await reopened.countByStatus()).toMatchObject({ done: 1, failed: 1 });
        expect(await reopened.put(makeView('d1', { title: 'stale' }), 1)).toBe(false);
        expect(await reopened.put(makeView('d1', { title: 'v3' }), 2)).toBe(true);
      } finally {
        await reopened.close();
      }
    });
  });

  describe(`DocumentViews contract: ${name}: filters agree with matchesFilter`, () => {
    let store: ContractStore;

    beforeAll(async () => {
      store = await open();
      for (const [i, [id, metadata]] of shuffled([...FILTER_FIXTURES.entries()])) {
        await store.views.put(makeView(id, { metadata, createdAt: at(i) }), 0);
      }
    });
    afterAll(async () => {
      await store?.cleanup();
    });

    it('the fixtures round-trip their metadata exactly', async () => {
      const stored = await collect(store.views.all());
      expect(stored.map((v) => [v.id, v.metadata])).toStrictEqual(FILTER_FIXTURES);
    });

    for (const c of FILTER_CASES) {
      it(c.name, async () => {
        const filter = Filters.parse(c.filter);
        const reference = FILTER_FIXTURES.filter(([, metadata]) => matchesFilter(metadata, filter)).map(([id]) => id);
        expect(reference, 'matchesFilter disagrees with the table: the fixture no longer tests what the case says').toStrictEqual(c.expected);
        const { items, total } = await store.views.list({ ...EVERYTHING, filter });
        expect(items.map((v) => v.id)).toStrictEqual(reference);
        expect(total).toBe(reference.length);
        const wrapped = Filters.parse({ AND: [{ OR: [c.filter] }] });
        expect((await store.views.list({ ...EVERYTHING, filter: wrapped })).total, 'wrapping in groups changes nothing').toBe(reference.length);
      });
    }
  });
}
