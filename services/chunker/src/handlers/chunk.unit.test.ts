import { createHash } from 'node:crypto';
import { Tiktoken } from 'js-tiktoken/lite';
import o200k_base from 'js-tiktoken/ranks/o200k_base';
import { beforeAll, describe, expect, it } from 'vitest';
import { chunkText, countTokens, DEFAULT_MAX_TOKENS, TOKENIZER } from './chunk.js';

// ---- a deterministic generator of varied, realistic-looking text -------------------------------

/** mulberry32: a tiny seeded PRNG, so every run builds the same documents. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SUBJECTS = [
  'The ingestion worker', 'Every replica', 'Our on-call engineer', 'The nightly compaction job', 'A misconfigured proxy',
  'The search gateway', 'Each tenant', 'The billing service', 'An idle consumer', 'The schema registry',
  'The mobile client', 'A background thread', 'The release manager', 'The load balancer', 'Every shard leader',
];
const VERBS = [
  'retries', 'rejects', 'buffers', 'replays', 'compresses', 'indexes', 'throttles', 'acknowledges', 'forwards',
  'validates', 'deduplicates', 'encrypts', 'samples', 'archives', 'reorders',
];
const OBJECTS = [
  'stale events', 'oversized payloads', 'duplicate messages', 'the embedding cache', 'partial uploads', 'expired sessions',
  'malformed headers', 'queued deletions', 'cold partitions', 'hot keys', 'audit records', 'signed URLs',
  'thumbnail requests', 'webhook deliveries', 'vector snapshots',
];
const TAILS = [
  'before the deadline expires', 'when the broker restarts', 'under sustained load', 'after a schema change',
  'during the weekly maintenance window', 'unless an operator intervenes', 'so that readers never see torn writes',
  'because the upstream clock drifts', 'while the disk is nearly full', 'without blocking the main loop',
  'as soon as the lease is renewed', 'in the order they were received', 'with exponential backoff', 'for at most ten minutes',
];
const QUESTIONS = [
  'Why does the queue grow at night?', 'What happens if two writers race?', 'Is the cache ever invalidated early?',
  'Who owns the retry budget?', 'How long do we keep tombstones?',
];

class TextGen {
  private readonly rand: () => number;
  constructor(seed: number) {
    this.rand = prng(seed);
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.rand() * (hi - lo + 1));
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.rand() * items.length)] as T;
  }
  sentence(): string {
    if (this.rand() < 0.08) return this.pick(QUESTIONS);
    const n = this.int(1, 9999);
    const s = `${this.pick(SUBJECTS)} ${this.pick(VERBS)} ${this.pick(OBJECTS)} ${this.pick(TAILS)}`;
    return this.rand() < 0.25 ? `${s}, which took ${n} ms in the last run.` : `${s}.`;
  }
  paragraph(min = 2, max = 7): string {
    return Array.from({ length: this.int(min, max) }, () => this.sentence()).join(' ');
  }
  list(): string {
    return Array.from({ length: this.int(3, 6) }, () => `- ${this.sentence()}`).join('\n');
  }
  code(): string {
    const name = this.pick(['retry', 'compact', 'replay', 'flush', 'drain']);
    return [
      '```ts',
      `export async function ${name}(items: string[]): Promise<number> {`,
      '  let done = 0;',
      '',
      '  # not a heading: inside a fence',
      `  for (const item of items) done += await ${name}One(item);`,
      '  return done;',
      '}',
      '```',
    ].join('\n');
  }
  /** A long markdown document: nested sections with paragraphs, lists and code fences. */
  markdown(sections: number): string {
    const out: string[] = ['# Operations handbook', this.paragraph()];
    for (let s = 1; s <= sections; s++) {
      out.push(`## ${s}. ${this.pick(OBJECTS)} ${this.pick(TAILS)}`);
      for (let sub = 1; sub <= this.int(1, 3); sub++) {
        out.push(`### ${s}.${sub} ${this.pick(SUBJECTS)}`);
        for (let p = 0; p < this.int(2, 6); p++) {
          const r = this.rand();
          out.push(r < 0.15 ? this.list() : r < 0.22 ? this.code() : this.paragraph());
        }
      }
    }
    return out.join('\n\n');
  }
}

const sha256 = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');

/** How many chunks of `after` are new, i.e. would need embedding, given the chunks of `before`. */
function newChunks(before: { hash: string }[], after: { hash: string }[]): number {
  const known = new Set(before.map((c) => c.hash));
  return after.filter((c) => !known.has(c.hash)).length;
}

let reference: Tiktoken;
beforeAll(() => {
  reference = new Tiktoken(o200k_base);
  countTokens('warm up');
});

// ---- tests ------------------------------------------------------------------------------------

describe('countTokens (o200k_base)', () => {
  it('matches js-tiktoken token for token on varied text', () => {
    const gen = new TextGen(7);
    const samples = [
      "Hello world, it's 2024! I'm here; they've gone. DON'T, WON'T, I'LL.",
      '<|endoftext|> and <|endofprompt|> are plain text here',
      '😀😀😀 👩‍👩‍👧‍👦 🇫🇷🇯🇵 ✨🚀',
      '我们今天讨论向量数据库和嵌入模型的设计。没有空格的中文文本，也要处理好！',
      'カタカナとひらがなと漢字が混ざった日本語の文章です。',
      '한국어 문장은 띄어쓰기를 합니다.',
      'function f(x) {\n  return x * 2;\n}\n\n\n   trailing   \t\n',
      'ÀÉÎÕÜ café naïve façade Œuvre straße',
      '1234567890 3.14159 0x1F 1e-9 -42',
      'المرحبا بالعالم',
      'नमस्ते दुनिया',
      'https://example.com/a/b?c=d&e=f#frag',
      '    indented\n\t\ttabs\r\nwindows line',
      'a'.repeat(300),
      '\u00a0non\u2009breaking\u3000spaces',
      gen.markdown(3),
    ];
    for (const s of samples) expect(countTokens(s), JSON.stringify(s.slice(0, 40))).toBe(reference.encode(s, [], []).length);
  });

  it('pre-tokenizes as the pattern does where it scans ASCII itself: js-tiktoken’s counts on random strings', () => {
    // Fragments where the pattern's alternatives meet: contractions, a slash after line breaks,
    // runs of spaces before words and symbols, digit runs, control characters; and non-ASCII
    // letters, digits, marks, spaces and symbols next to them, where the pattern decides.
    const fragments = ['/\n/', "'re", "'LL", "'Ve", "'s", "'D", "'", "'x", ' /', '\r\n', '  ', ' \n ', '\t', '\v', '\f', 'ABC', 'abc', 'Abc', 'aBC', 'x',
      'Q', '123', '1234', ' 12', '://', '\n\n', ' .', '..', '#', '*', '`', '-', ',', '\x00', '\x1f', '\x7f', 'é', 'É', '²', '\u00a0', '—', '…', '\u0301',
      '😀', '中', '\u2028', 'ß', 'ǅ', 'ʰ', '\u3000', '٣', '’', ' ', ' ', 'e', 's', 't'];
    const rand = prng(99);
    for (let k = 0; k < 20_000; k++) {
      const asciiOnly = rand() < 0.5;
      let s = '';
      for (let n = 1 + Math.floor(rand() * 24); n > 0; n--) {
        let f = fragments[Math.floor(rand() * fragments.length)] as string;
        while (asciiOnly && /[^\x00-\x7f]/.test(f)) f = fragments[Math.floor(rand() * fragments.length)] as string;
        s += f;
      }
      expect(countTokens(s), JSON.stringify(s)).toBe(reference.encode(s, [], []).length);
    }
  });

  it('names the tokenizer', () => {
    expect(TOKENIZER).toBe('o200k_base');
  });
});

describe('chunkText', () => {
  it('keeps every chunk within maxTokens on a long document, with real counts and sha256 hashes', () => {
    const doc = new TextGen(1).markdown(60);
    for (const maxTokens of [DEFAULT_MAX_TOKENS, 200, 64]) {
      const chunks = chunkText(doc, 'markdown', { maxTokens });
      expect(chunks.length).toBeGreaterThan(20);
      chunks.forEach((c, i) => {
        expect(c.index).toBe(i);
        expect(c.text).toBe(c.text.trim());
        expect(c.text.length).toBeGreaterThan(0);
        expect(c.tokens).toBeLessThanOrEqual(maxTokens);
        expect(c.tokens).toBe(reference.encode(c.text, [], []).length);
        expect(c.hash).toBe(sha256(c.text));
      });
    }
  });

  it('counts each chunk as its own text, whatever pre-tokens its elements and heading make where they meet', () => {
    // Chunk counts reuse the pre-tokens found while counting the elements; at the joins (a
    // paragraph ending in a symbol takes the line breaks after it, a contraction, a slash, spaces)
    // and after the heading prefix they must be found again.
    const ends = ['.', '/', "'", "'s", ' ', '  ', '--', '1', '12', 'Ab', 'AB', 'é', '—', ':', ')'];
    const starts = ['/', "'re", ' x', 'Word', 'word', '12', '-', '.', 'é', '😀', '#x', '\t'];
    const rand = prng(5);
    const gen = new TextGen(5);
    for (let d = 0; d < 30; d++) {
      const paragraphs = Array.from({ length: 30 }, () => {
        const start = starts[Math.floor(rand() * starts.length)] as string;
        const end = ends[Math.floor(rand() * ends.length)] as string;
        return `${start}${gen.paragraph(1, 3)}${end}`;
      });
      const heading = `# Part ${d}${ends[d % ends.length]}`;
      const doc = `${heading}\n\n${paragraphs.join(d % 2 ? '\n\n' : '\n \n')}`;
      for (const format of ['markdown', 'plain'] as const) {
        for (const maxTokens of [24, 64, 200]) {
          for (const c of chunkText(doc, format, { maxTokens })) expect(c.tokens, JSON.stringify(c.text.slice(0, 60))).toBe(reference.encode(c.text, [], []).length);
        }
      }
    }
    // Tens of thousands of spaces after a line break (read to their end, kept short as a pre-token):
    // checked against countTokens, itself checked against js-tiktoken above (which is quadratic on such runs).
    const spaced = ['one.', 'two', 'three', 'four'].map((w, i) => `${w}\n${' \t'.repeat(20_000 + i * 9_000)}${gen.paragraph(2, 4)}`).join('\n\n');
    for (const maxTokens of [32, 512]) {
      for (const c of chunkText(spaced, 'plain', { maxTokens })) expect(c.tokens).toBe(countTokens(c.text));
    }
  });

  it('loses no text: every word of the document is in the chunks, in order', () => {
    const doc = new TextGen(2).markdown(20);
    const words = (s: string): string[] => s.split(/\s+/).filter((w) => w !== '');
    const chunks = chunkText(doc, 'markdown', { maxTokens: 128 });
    // Strip the heading-path prefix (first line) from chunks that carry one.
    const bodies = chunks.map((c) => (c.text.startsWith('# ') ? c.text.slice(c.text.indexOf('\n\n') + 2) : c.text));
    const headingless = doc
      .split('\n')
      .filter((line) => !/^#{1,6} /.test(line))
      .join('\n');
    expect(words(bodies.join('\n'))).toEqual(words(headingless));
  });

  it('carries the heading path as the first line of each chunk of a section', () => {
    const gen = new TextGen(3);
    const doc = [
      '# Guide',
      'Intro paragraph for the guide.',
      '## Install',
      ...Array.from({ length: 12 }, () => gen.paragraph(4, 6)),
      '### Linux',
      'Use the package manager of your distribution.',
      '## Usage',
      'Run the binary with a config file.',
    ].join('\n\n');
    const chunks = chunkText(doc, 'markdown', { maxTokens: 128 });
    expect(chunks[0]?.text).toBe('# Guide\n\nIntro paragraph for the guide.');
    const install = chunks.filter((c) => c.text.startsWith('# Guide > ## Install\n\n'));
    expect(install.length).toBeGreaterThan(3);
    expect(chunks.some((c) => c.text === '# Guide > ## Install > ### Linux\n\nUse the package manager of your distribution.')).toBe(true);
    // "## Usage" closes "## Install": the path climbs back up.
    expect(chunks[chunks.length - 1]?.text).toBe('# Guide > ## Usage\n\nRun the binary with a config file.');
    // A chunk never mixes two sections.
    for (const c of chunks) expect(c.text.split('\n').filter((l) => /^#{1,6} /.test(l))).toHaveLength(1);
  });

  it('understands setext headings and ignores "#" without a space', () => {
    const chunks = chunkText('Title\n=====\n\n#hashtag is text\n\nSub\n---\n\nBody text.', 'markdown');
    expect(chunks.map((c) => c.text)).toEqual(['# Title\n\n#hashtag is text', '# Title > ## Sub\n\nBody text.']);
  });

  it('keeps a fenced code block intact, blank lines and "#" lines included', () => {
    const gen = new TextGen(4);
    const fence = gen.code();
    const doc = ['## Code', gen.paragraph(5, 7), fence, gen.paragraph(5, 7)].join('\n\n');
    const chunks = chunkText(doc, 'markdown', { maxTokens: 160 });
    const holders = chunks.filter((c) => c.text.includes('```ts'));
    expect(holders).toHaveLength(1);
    expect(holders[0]?.text).toContain(fence);
    // The "#" line inside the fence did not open a section.
    for (const c of chunks) expect(c.text.split('\n')[0]).toBe('## Code');
  });

  it('splits an oversized code block by lines, not mid-line', () => {
    const lines = Array.from({ length: 300 }, (_, i) => `const value${i} = compute(${i}, "${'x'.repeat(i % 17)}");`);
    const doc = ['```js', ...lines, '```'].join('\n');
    const chunks = chunkText(doc, 'markdown', { maxTokens: 100 });
    expect(chunks.length).toBeGreaterThan(10);
    const got = chunks.flatMap((c) => c.text.split('\n')).filter((l) => !l.startsWith('```'));
    expect(got).toEqual(lines);
  });

  it('splits conversations between turns', () => {
    const gen = new TextGen(5);
    const speakers = ['user', 'assistant', 'Dr. Lee', '**Moderator**'];
    const turns = Array.from({ length: 60 }, (_, i) => {
      const who = speakers[i % speakers.length] as string;
      const body = `(turn ${i}) ${gen.paragraph(1, 4)}`;
      // Some turns continue on following lines, one after a blank line.
      return i % 5 === 0 ? `${who}: ${body}\n${gen.sentence()}\n\n${gen.sentence()}` : `${who}: ${body}`;
    });
    const chunks = chunkText(turns.join('\n'), 'conversation', { maxTokens: 200 });
    expect(chunks.length).toBeGreaterThan(5);
    const label = /^(user|assistant|Dr\. Lee|\*\*Moderator\*\*): /;
    for (const c of chunks) {
      expect(c.text).toMatch(label);
      expect(c.tokens).toBeLessThanOrEqual(200);
    }
    // Each turn fits in a chunk, so each lies whole inside exactly one.
    for (const turn of turns) expect(chunks.filter((c) => c.text.includes(turn))).toHaveLength(1);
  });

  it('makes each turn of a conversation its own chunk, carrying its session date and speaker', () => {
    const text = [
      'Session 1 · 2023-05-08',
      'user: We adopted a beagle and named him Biscuit.',
      'assistant: Lovely name!',
      '',
      '--- 2023-06-01 ---',
      'user: Biscuit chewed my shoes.',
      'and the sofa, on a second line',
    ].join('\n');
    const chunks = chunkText(text, 'conversation');
    expect(chunks.map((c) => c.text)).toEqual([
      '[2023-05-08] user: We adopted a beagle and named him Biscuit.',
      '[2023-05-08] assistant: Lovely name!',
      '[2023-06-01] user: Biscuit chewed my shoes.\nand the sofa, on a second line',
    ]);
    // Appending messages adds chunks and leaves the earlier ones (and their embeddings) as they were.
    const more = chunkText(`${text}\nassistant: Oh no.`, 'conversation');
    expect(more.slice(0, 3).map((c) => c.hash)).toEqual(chunks.map((c) => c.hash));
    expect(more).toHaveLength(4);
  });

  it('says whose turn a piece of a too-long turn continues', () => {
    const gen = new TextGen(7);
    const long = `Dr. Lee: ${Array.from({ length: 40 }, () => gen.sentence()).join(' ')}`;
    const chunks = chunkText(`2024-01-02\nuser: Tell me everything.\n${long}`, 'conversation', { maxTokens: 100 });
    expect(chunks[0]!.text).toBe('[2024-01-02] user: Tell me everything.');
    expect(chunks[1]!.text.startsWith('[2024-01-02] Dr. Lee: ')).toBe(true);
    for (const c of chunks.slice(2)) expect(c.text.startsWith('[2024-01-02] Dr. Lee (continued): ')).toBe(true);
    for (const c of chunks) expect(c.tokens).toBeLessThanOrEqual(100);
  });

  it('splits a turn that is too long by sentences, keeping later turns whole', () => {
    const gen = new TextGen(6);
    const long = `assistant: ${Array.from({ length: 40 }, () => gen.sentence()).join(' ')}`;
    const chunks = chunkText(`user: Tell me everything.\n${long}\nuser: Thanks!`, 'conversation', { maxTokens: 100 });
    expect(chunks.length).toBeGreaterThan(5);
    for (const c of chunks) {
      expect(c.tokens).toBeLessThanOrEqual(100);
      // Cuts inside the long turn fall between sentences.
      expect(c.text).toMatch(/[.?!]$/);
    }
    expect(chunks[chunks.length - 1]?.text.endsWith('user: Thanks!')).toBe(true);
  });

  it('splits a single oversized sentence by token windows without losing text', () => {
    const gen = new TextGen(8);
    const clauses = Array.from({ length: 400 }, () => `${gen.pick(SUBJECTS).toLowerCase()} ${gen.pick(VERBS)} ${gen.pick(OBJECTS)}`);
    const sentence = `${clauses.join(', ')}.`;
    expect(countTokens(sentence)).toBeGreaterThan(2000);
    const chunks = chunkText(sentence, 'plain', { maxTokens: 256 });
    expect(chunks.length).toBeGreaterThanOrEqual(8);
    for (const c of chunks) expect(c.tokens).toBeLessThanOrEqual(256);
    // Windows end on token boundaries, so joining them (spaces were trimmed at the cuts) gives back
    // the sentence up to whitespace.
    const squash = (s: string): string => s.replace(/\s+/g, '');
    expect(squash(chunks.map((c) => c.text).join(''))).toBe(squash(sentence));
  });

  it('is deterministic', () => {
    const doc = new TextGen(9).markdown(30);
    const a = chunkText(doc, 'markdown');
    const b = chunkText(doc, 'markdown');
    expect(b).toEqual(a);
    expect(chunkText(doc.replace(/\n/g, '\r\n'), 'markdown')).toEqual(a);
  });

  describe('incremental property: an edit changes only the chunks around it', () => {
    const gen = new TextGen(10);
    const paragraphs = Array.from({ length: 420 }, () => gen.paragraph());
    const join = (ps: string[]): string => ps.join('\n\n');
    let before: ReturnType<typeof chunkText>;
    beforeAll(() => {
      before = chunkText(join(paragraphs), 'plain');
    });

    it('starts from a document of about 100 chunks', () => {
      expect(before.length).toBeGreaterThanOrEqual(90);
      expect(before.length).toBeLessThanOrEqual(130);
    });

    it('a word changed inside a paragraph changes at most 2 chunks', () => {
      for (let k = 0; k < paragraphs.length; k += 7) {
        const edited = paragraphs.slice();
        const words = (edited[k] as string).split(' ');
        words[Math.floor(words.length / 2)] = 'reworded';
        edited[k] = words.join(' ');
        const after = chunkText(join(edited), 'plain');
        expect(newChunks(before, after), `paragraph ${k}`).toBeLessThanOrEqual(2);
        expect(newChunks(before, after), `paragraph ${k}`).toBeGreaterThanOrEqual(1);
      }
    });

    it('a sentence appended to a paragraph changes at most 2 chunks', () => {
      const extra = new TextGen(11);
      for (let k = 3; k < paragraphs.length; k += 7) {
        const edited = paragraphs.slice();
        edited[k] = `${edited[k]} ${extra.sentence()}`;
        expect(newChunks(before, chunkText(join(edited), 'plain')), `paragraph ${k}`).toBeLessThanOrEqual(2);
      }
    });

    it('in markdown too, chunks away from the edit keep their index and hash', () => {
      const doc = new TextGen(12).markdown(80);
      const chunksBefore = chunkText(doc, 'markdown');
      expect(chunksBefore.length).toBeGreaterThan(80);
      // Mid-paragraph (after a full stop), so neither a heading nor a paragraph's opening.
      const target = '. The billing service';
      const at = doc.indexOf(target, Math.floor(doc.length / 2));
      const editedDoc = `${doc.slice(0, at)}. The invoicing service${doc.slice(at + target.length)}`;
      const after = chunkText(editedDoc, 'markdown');
      expect(newChunks(chunksBefore, after)).toBeLessThanOrEqual(2);
      expect(after.length).toBe(chunksBefore.length);
      const moved = after.filter((c, i) => c.hash !== chunksBefore[i]?.hash);
      expect(moved.length).toBeLessThanOrEqual(2);
    });
  });

  it('gives no chunks for empty or whitespace-only text', () => {
    for (const format of ['plain', 'markdown', 'conversation'] as const) {
      expect(chunkText('', format)).toEqual([]);
      expect(chunkText(' \n\t\r\n  \u3000 ', format)).toEqual([]);
    }
  });

  it('still returns a markdown document made only of headings', () => {
    const chunks = chunkText('# Title\n\n## Empty section', 'markdown');
    expect(chunks.map((c) => c.text)).toEqual(['# Title\n\n## Empty section']);
  });

  it('handles CJK without spaces: sentences when it has them, token windows when it has none', () => {
    const sentences = Array.from(
      { length: 400 },
      (_, i) => `第${i}号服务在高负载下会重新排序消息并压缩旧的事件日志，以便读者永远不会看到不完整的写入。`,
    ).join('');
    const withPunctuation = chunkText(sentences, 'plain', { maxTokens: 120 });
    expect(withPunctuation.length).toBeGreaterThan(10);
    for (const c of withPunctuation) {
      expect(c.tokens).toBeLessThanOrEqual(120);
      expect(c.text.endsWith('。')).toBe(true);
    }
    expect(withPunctuation.map((c) => c.text).join('')).toBe(sentences);

    const unbroken = '向量数据库嵌入模型内容记忆服务事件溯源'.repeat(2000);
    const windows = chunkText(unbroken, 'plain', { maxTokens: 100 });
    for (const c of windows) expect(c.tokens).toBeLessThanOrEqual(100);
    expect(windows.map((c) => c.text).join('')).toBe(unbroken);
  });

  it('never cuts through a character: emoji spanning several tokens stay whole', () => {
    const emoji = '👩‍👩‍👧‍👦🇯🇵😀🚀🧑🏽‍💻'.repeat(3000);
    const chunks = chunkText(emoji, 'plain', { maxTokens: 64 });
    expect(chunks.length).toBeGreaterThan(10);
    for (const c of chunks) {
      expect(c.tokens).toBeLessThanOrEqual(64);
      expect(c.text).not.toContain('\uFFFD');
      expect(c.text).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/);
    }
    expect(chunks.map((c) => c.text).join('')).toBe(emoji);
  });

  it('cuts a 2 MB word (no whitespace, no punctuation) into windows of at most maxTokens, losing nothing (time printed)', () => {
    // Before long pre-tokens were cut into runs, one 8 MB word kept the chunker busy for minutes.
    const word = 'abcdefghij'.repeat(200_000);
    const started = performance.now();
    const chunks = chunkText(word, 'plain');
    const ms = performance.now() - started;
    console.log(`chunkText: a ${(word.length / 1e6).toFixed(1)} MB word -> ${chunks.length} chunks in ${ms.toFixed(0)} ms`);
    expect(chunks.length).toBeGreaterThan(100);
    for (const c of chunks) expect(c.tokens).toBeLessThanOrEqual(DEFAULT_MAX_TOKENS);
    expect(chunks.map((c) => c.text).join('')).toBe(word);
  });

  it('counts a long run exactly as js-tiktoken up to the run length, then per run', () => {
    const run = 'xy'.repeat(512);
    expect(countTokens(run)).toBe(reference.encode(run, [], []).length);
    expect(countTokens(run + run)).toBe(2 * reference.encode(run, [], []).length);
  });

  it('rejects nonsensical size options', () => {
    expect(() => chunkText('x', 'plain', { maxTokens: 4 })).toThrow(RangeError);
    expect(() => chunkText('x', 'plain', { maxTokens: 100, minTokens: 101 })).toThrow(RangeError);
    expect(() => chunkText('x', 'plain', { maxTokens: 100.5 })).toThrow(RangeError);
  });

  it('chunks 1 MB of markdown quickly (figure printed, not asserted)', () => {
    const gen = new TextGen(13);
    let doc = '';
    while (doc.length < 1_000_000) doc += `${gen.markdown(40)}\n\n`;
    const started = performance.now();
    const chunks = chunkText(doc, 'markdown');
    const ms = performance.now() - started;
    const tokens = chunks.reduce((sum, c) => sum + c.tokens, 0);
    console.log(
      `chunkText: ${(doc.length / 1e6).toFixed(2)} MB markdown -> ${chunks.length} chunks, ${tokens} tokens ` +
        `(mean ${(tokens / chunks.length).toFixed(0)}/chunk) in ${ms.toFixed(0)} ms (encoder already warm)`,
    );
    for (const c of chunks) expect(c.tokens).toBeLessThanOrEqual(DEFAULT_MAX_TOKENS);
  });
});
