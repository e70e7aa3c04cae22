import { describe, expect, it } from 'vitest';
import { HashedEmbedder } from './hashed.js';
import { createEmbedder } from './index.js';
import { cosine, norm } from './testing/vectors.js';

async function pair(e: HashedEmbedder, a: string, b: string): Promise<number> {
  const [va, vb] = await e.embed([a, b]);
  return cosine(va, vb);
}

describe('HashedEmbedder', () => {
  const embedder = new HashedEmbedder();

  it('defaults to 384 dimensions and names the model after them', async () => {
    expect(embedder.dim).toBe(384);
    expect(embedder.model).toBe('hashed-ngram-v1-384');
    const [v] = await embedder.embed(['hello']);
    expect(v).toBeInstanceOf(Float32Array);
    expect(v?.length).toBe(384);
  });

  it('gives different model names for different dims', () => {
    const a = new HashedEmbedder({ dim: 256 });
    const b = new HashedEmbedder({ dim: 1024 });
    expect(a.model).toBe('hashed-ngram-v1-256');
    expect(b.model).toBe('hashed-ngram-v1-1024');
    expect(a.model).not.toBe(b.model);
  });

  it('rejects a nonsensical dim', () => {
    expect(() => new HashedEmbedder({ dim: 0 })).toThrow(RangeError);
    expect(() => new HashedEmbedder({ dim: 12.5 })).toThrow(RangeError);
  });

  it('is deterministic across calls and instances', async () => {
    const texts = ['The quick brown fox jumps over the lazy dog.', 'Événements indexés à 10:42', '向量数据库', ''];
    const first = await embedder.embed(texts);
    const second = await embedder.embed(texts);
    const other = await new HashedEmbedder({ dim: 384 }).embed(texts);
    expect(second).toEqual(first);
    expect(other).toEqual(first);
  });

  it('returns unit vectors', async () => {
    const texts = [
      'a',
      'Retries use exponential backoff capped at thirty seconds.',
      'repeat repeat repeat repeat repeat',
      'Ünïcödé façade — naïve café',
      'カタカナとひらがなと漢字',
      '1234 5678',
      'x'.repeat(5000),
    ];
    for (const v of await embedder.embed(texts)) expect(norm(v)).toBeCloseTo(1, 5);
  });

  it('gives cosine 1 for identical texts, and for texts differing only in case, width or accents', async () => {
    const t = 'The broker replays unacknowledged messages after a restart.';
    expect(await pair(embedder, t, t)).toBeCloseTo(1, 6);
    expect(await pair(embedder, 'Café Crème', 'cafe creme')).toBeCloseTo(1, 6);
    expect(await pair(embedder, 'ＡＢＣ　１２３', 'abc 123')).toBeCloseTo(1, 6);
  });

  it('scores a paraphrase that shares words above an unrelated text', async () => {
    const cases = [
      {
        text: 'The cat sat on the warm mat near the kitchen door.',
        paraphrase: 'A cat was sitting on the mat by the kitchen door.',
        unrelated: 'Quarterly revenue grew by twelve percent thanks to strong cloud sales.',
      },
      {
        text: 'To reset your password, open the account settings page and choose "Forgot password".',
        paraphrase: 'You can reset a forgotten password from the settings page of your account.',
        unrelated: 'The hiking trail climbs steeply through pine forest before reaching the ridge.',
      },
      {
        text: 'The chunker splits markdown documents by headings before counting tokens.',
        paraphrase: 'Markdown documents are split at their headings by the chunker, then tokens are counted.',
        unrelated: 'Preheat the oven and bake the bread for forty minutes until golden.',
      },
    ];
    for (const c of cases) {
      const close = await pair(embedder, c.text, c.paraphrase);
      const far = await pair(embedder, c.text, c.unrelated);
      // Unrelated texts still share stop words ("the", "a") and common trigrams: lexical, not
      // semantic, so "far" is small rather than zero.
      expect(close, c.text).toBeGreaterThan(far + 0.3);
      expect(far, c.text).toBeLessThan(0.3);
    }
  });

  it('is robust to typos through character trigrams', async () => {
    expect(await pair(embedder, 'embeddings', 'embedings')).toBeGreaterThan(0.5);
    expect(await pair(embedder, 'embeddings', 'giraffe')).toBeLessThan(0.2);
  });

  it('relates CJK texts through shared characters and character pairs', async () => {
    const close = await pair(embedder, '向量数据库支持相似度搜索', '相似度搜索需要向量数据库');
    const far = await pair(embedder, '向量数据库支持相似度搜索', '今天下午天气很好');
    expect(close).toBeGreaterThan(0.5);
    expect(far).toBeLessThan(0.2);
  });

  it('gives a fixed unit vector to text without words', async () => {
    const vs = await embedder.embed(['', '   \n\t ', '?!… —']);
    for (const v of vs) {
      expect(norm(v)).toBe(1);
      expect(v[0]).toBe(1);
    }
    expect(vs[1]).toEqual(vs[0]);
    expect(vs[2]).toEqual(vs[0]);
  });

  it('embeds 1,000 texts of ~2 KB quickly (figure printed, not asserted)', async () => {
    const words =
      'stream event chunk index vector embedding memory search query broker replica partition consumer producer ' +
      'latency throughput backoff retry schema version tenant container metadata filter snapshot compaction lease ' +
      'deadline cache hash token sentence paragraph heading document revision projection gateway extractor';
    const vocab = words.split(' ');
    let seed = 12345;
    const next = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed;
    };
    const texts = Array.from({ length: 1000 }, (_, i) => {
      let t = `Document ${i}:`;
      while (t.length < 2000) t += ` ${vocab[next() % vocab.length]}${next() % 7 === 0 ? '.' : ''}`;
      return t;
    });
    const started = performance.now();
    const vectors = await embedder.embed(texts);
    const ms = performance.now() - started;
    console.log(
      `HashedEmbedder: 1000 texts x ~2 KB (${(texts.reduce((s, t) => s + t.length, 0) / 1e6).toFixed(2)} MB) in ${ms.toFixed(0)} ms`,
    );
    expect(vectors).toHaveLength(1000);
  });
});

describe('createEmbedder', () => {
  it('builds the hashed embedder, default and sized', () => {
    const d = createEmbedder({ kind: 'hashed' });
    expect(d).toBeInstanceOf(HashedEmbedder);
    expect(d.model).toBe('hashed-ngram-v1-384');
    const s = createEmbedder({ kind: 'hashed', dim: 768 });
    expect(s.dim).toBe(768);
    expect(s.model).toBe('hashed-ngram-v1-768');
  });
});
