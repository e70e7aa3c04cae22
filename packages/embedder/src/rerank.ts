/**
 * The reranker port: scores (query, passage) pairs with a cross-encoder, which reads the two
 * together and so judges relevance better than comparing two separately made vectors. memstream
 * ships no reranking model (none can be installed offline); `rerank: true` on a search uses a
 * configured server and is a no-op without one.
 */
import { z } from 'zod';

/** Relevance of each text to the query, in 0..1, in the order of `texts`. */
export interface Reranker {
  readonly model: string;
  rerank(query: string, texts: string[]): Promise<number[]>;
}

/** The two wire formats in use: TEI's `/rerank`, and Cohere's `/v1/rerank` (also Jina, vLLM, Xinference). */
export type RerankApi = 'tei' | 'cohere';

export interface HttpRerankerOptions {
  /** The server root: TEI's (`http://host:8080`) or the API root up to /v1 for `cohere`. */
  url: string;
  api: RerankApi;
  /** Sent with `cohere` requests; for `tei` only a label for the logs. */
  model?: string | undefined;
  apiKey?: string | undefined;
  timeoutMs?: number;
}

const TeiResponse = z.array(z.object({ index: z.number().int().nonnegative(), score: z.number() }));
const CohereResponse = z.object({ results: z.array(z.object({ index: z.number().int().nonnegative(), relevance_score: z.number() })) });

/** A reranking server over HTTP. Scores outside 0..1 (raw logits) are mapped through a sigmoid. */
export class HttpReranker implements Reranker {
  readonly model: string;

  constructor(private readonly opts: HttpRerankerOptions) {
    this.model = opts.model ?? `${opts.api}:${opts.url}`;
  }

  async rerank(query: string, texts: string[]): Promise<number[]> {
    if (texts.length === 0) return [];
    const base = this.opts.url.replace(/\/+$/, '');
    const body =
      this.opts.api === 'tei'
        ? { query, texts, raw_scores: false, truncate: true }
        : { model: this.opts.model, query, documents: texts, top_n: texts.length };
    const res = await fetch(`${base}/rerank`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {}) },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(this.opts.timeoutMs ?? 10_000),
    });
    if (!res.ok) throw new Error(`reranker ${base}/rerank answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
    const json: unknown = await res.json();
    const pairs =
      this.opts.api === 'tei'
        ? TeiResponse.parse(json).map((r) => ({ index: r.index, score: r.score }))
        : CohereResponse.parse(json).results.map((r) => ({ index: r.index, score: r.relevance_score }));
    const out = new Array<number>(texts.length).fill(0);
    for (const { index, score } of pairs) if (index < texts.length) out[index] = score >= 0 && score <= 1 ? score : 1 / (1 + Math.exp(-score));
    return out;
  }
}

/** The reranker settings (gateway): unset RERANKER_URL means no reranker, and `rerank` does nothing. */
export const rerankerEnv = {
  /** A reranking server; unset: `rerank: true` is accepted and changes nothing. */
  RERANKER_URL: z.preprocess((v) => (v === '' ? undefined : v), z.url().optional()),
  /** `tei` (text-embeddings-inference's /rerank) or `cohere` (/v1/rerank: Cohere, Jina, vLLM). */
  RERANKER_API: z.enum(['tei', 'cohere']).default('tei'),
  /** The model name sent with `cohere` requests. */
  RERANKER_MODEL: z.preprocess((v) => (v === '' ? undefined : v), z.string().min(1).optional()),
  RERANKER_API_KEY: z.preprocess((v) => (v === '' ? undefined : v), z.string().optional()),
};

/** The reranker those settings describe, or undefined. */
export function rerankerFrom(c: { RERANKER_URL?: string | undefined; RERANKER_API: RerankApi; RERANKER_MODEL?: string | undefined; RERANKER_API_KEY?: string | undefined }): Reranker | undefined {
  if (!c.RERANKER_URL) return undefined;
  return new HttpReranker({ url: c.RERANKER_URL, api: c.RERANKER_API, model: c.RERANKER_MODEL, apiKey: c.RERANKER_API_KEY });
}
