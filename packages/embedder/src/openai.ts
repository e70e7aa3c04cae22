import { RetryableError } from '@memstream/kit';
import { postToProvider, providerEndpoint, type ProviderCallPolicy } from './http.js';
import type { Embedder } from './port.js';
import { localRateLimiter, type RateLimiter } from './rate-limit.js';

export interface OpenAiEmbedderOptions {
  /** The API root up to and including /v1, e.g. https://api.openai.com/v1 or http://localhost:11434/v1. */
  baseUrl: string;
  /** Sent as "Authorization: Bearer …"; omit for local servers that need none. */
  apiKey?: string | undefined;
  /** The model name the server knows, sent with every request. */
  model: string;
  /**
   * The vector length the model returns. Required because the index records it with every vector;
   * every response is checked against it.
   */
  dim: number;
  /** Texts per request (default 64); a larger `embed` call is split into several requests. */
  batchSize?: number | undefined;
  /** Retries of one request after its first attempt, on 408, 429, 5xx and network errors (default 5). */
  maxRetries?: number | undefined;
  /** A local token bucket of this many requests per second; ignored when `rateLimiter` is given. */
  requestsPerSecond?: number | undefined;
  /** The local token bucket's size: requests that may go out at once after an idle spell (default 1). */
  burst?: number | undefined;
  /** A limiter shared with other replicas (see RateLimiter); takes precedence over requestsPerSecond. */
  rateLimiter?: RateLimiter | undefined;
  /** One request's deadline, response body included (default 60 s); a timeout is retried. */
  timeoutMs?: number | undefined;
  /** First backoff (default 500 ms); it doubles per retry, with jitter, up to `maxBackoffMs`. */
  baseBackoffMs?: number | undefined;
  /**
   * Longest single wait (default 30 s), for our own backoff and for a server's Retry-After. A
   * server asking for longer is not waited for here: the call fails at once with a RetryableError
   * carrying the wait, and the message goes back to the broker instead of pinning a worker slot.
   */
  maxBackoffMs?: number | undefined;
}

/**
 * The server answered with vectors of another length than configured. Not a PermanentError: the
 * document is fine and the configuration is wrong, so the runner retries and finally
 * dead-letters the message (kept, replayable) rather than failing documents one by one as
 * permanently bad.
 */
export class EmbeddingDimensionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EmbeddingDimensionError';
  }
}

/**
 * Embeddings from any server that speaks OpenAI's POST /v1/embeddings: OpenAI itself, Ollama,
 * vLLM, Hugging Face TEI, LiteLLM…
 *
 * - Batching: `embed` sends `batchSize` texts per request, one request after another, and
 *   returns the vectors in input order (each response is ordered by its `index` field, since the
 *   API does not promise to answer in order).
 * - Vectors are L2-normalised here: OpenAI's are already unit length but Ollama's and TEI's may
 *   not be, and the index ranks by dot product.
 * - Errors: retried and classified by postToProvider (./http.ts): 408, 429, 5xx, timeouts and
 *   network errors with backoff or the server's Retry-After, then a RetryableError; any other 4xx
 *   a PermanentError at once, which fails the document with the server's reason.
 * - The model name recorded in the index is `openai:<model>:<dim>`: the same on every replica
 *   and for the gateway's query embeddings, and different for another model or dimension.
 */
export class OpenAiEmbedder implements Embedder {
  readonly model: string;
  readonly dim: number;
  private readonly url: string;
  private readonly remoteModel: string;
  private readonly apiKey: string | undefined;
  private readonly batchSize: number;
  private readonly policy: ProviderCallPolicy;

  constructor(options: OpenAiEmbedderOptions) {
    const { dim } = options;
    if (!Number.isInteger(dim) || dim < 1 || dim > 65_536) {
      throw new RangeError(`OpenAiEmbedder: dim must be an integer in 1..65536, got ${dim}`);
    }
    if (options.model.trim() === '') throw new RangeError('OpenAiEmbedder: model must not be empty');
    const url = providerEndpoint('OpenAiEmbedder', options.baseUrl, '/embeddings');
    const batchSize = options.batchSize ?? 64;
    const maxRetries = options.maxRetries ?? 5;
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError(`OpenAiEmbedder: batchSize must be a positive integer, got ${batchSize}`);
    if (!Number.isInteger(maxRetries) || maxRetries < 0) throw new RangeError(`OpenAiEmbedder: maxRetries must be a non-negative integer, got ${maxRetries}`);

    this.dim = dim;
    this.remoteModel = options.model;
    this.model = `openai:${options.model}:${dim}`;
    this.url = url;
    this.apiKey = options.apiKey || undefined;
    this.batchSize = batchSize;
    this.policy = {
      maxRetries,
      limiter: options.rateLimiter ?? (options.requestsPerSecond === undefined ? undefined : localRateLimiter(options.requestsPerSecond, options.burst ?? 1)),
      timeoutMs: options.timeoutMs ?? 60_000,
      baseBackoffMs: options.baseBackoffMs ?? 500,
      maxBackoffMs: options.maxBackoffMs ?? 30_000,
    };
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    const out: Float32Array[] = [];
    // Sequential on purpose: the service already runs EMBEDDER_CONCURRENCY documents at once,
    // and parallel batches of one document would only compete for the same rate limit.
    for (let i = 0; i < texts.length; i += this.batchSize) {
      const vectors = await this.embedBatch(texts.slice(i, i + this.batchSize));
      for (const v of vectors) out.push(v);
    }
    return out;
  }

  /** One request, retried (postToProvider); returns one unit vector per input, in input order. */
  private async embedBatch(input: string[]): Promise<Float32Array[]> {
    const text = await postToProvider(this.url, this.apiKey, JSON.stringify({ model: this.remoteModel, input }), this.policy, { kind: 'embedding', model: this.remoteModel });
    return this.parse(text, input.length);
  }

  /** The vectors of a 200 answer, in input order, unit length, checked against `dim`. */
  private parse(text: string, count: number): Float32Array[] {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      // A proxy's HTML error page with status 200, a truncated body: not the document's fault.
      throw new RetryableError(`embedding service at ${this.url} answered 200 with a body that is not JSON: ${text.slice(0, 200)}`);
    }
    const data = (json as { data?: unknown } | null)?.data;
    if (!Array.isArray(data) || data.length !== count) {
      throw new RetryableError(
        `embedding service at ${this.url} answered ${Array.isArray(data) ? `${data.length} embeddings` : 'without a data array'} for ${count} inputs`,
      );
    }
    const out = new Array<Float32Array | undefined>(count);
    data.forEach((item: unknown, position: number) => {
      const { index, embedding } = (item ?? {}) as { index?: unknown; embedding?: unknown };
      // A server that omits `index` is taken to answer in order.
      const at = index === undefined ? position : index;
      if (typeof at !== 'number' || !Number.isInteger(at) || at < 0 || at >= count || out[at] !== undefined) {
        throw new RetryableError(`embedding service at ${this.url} answered a missing, repeated or out-of-range index ${String(at)}`);
      }
      if (!Array.isArray(embedding)) {
        throw new RetryableError(
          `embedding service at ${this.url} answered embedding ${at} as ${typeof embedding}, not an array of numbers (base64 encoding is not requested)`,
        );
      }
      if (embedding.length !== this.dim) {
        throw new EmbeddingDimensionError(
          `model ${this.remoteModel} at ${this.url} returns ${embedding.length}-dimensional vectors but the configured dim is ` +
            `${this.dim}: set EMBEDDING_DIM=${embedding.length} (the index records the dimension, so it must be the model's)`,
        );
      }
      out[at] = unitVector(embedding, this.url, at);
    });
    return out as Float32Array[];
  }
}

/** The array as a unit-length Float32Array; a zero or non-numeric vector is rejected. */
function unitVector(values: unknown[], url: string, at: number): Float32Array {
  const v = new Float32Array(values.length);
  let sumSquares = 0;
  for (let i = 0; i < values.length; i++) {
    const x = values[i];
    if (typeof x !== 'number' || !Number.isFinite(x)) {
      throw new RetryableError(`embedding service at ${url} answered a non-finite component in embedding ${at}`);
    }
    v[i] = x;
    sumSquares += x * x;
  }
  // Cosine with a zero vector is undefined; no sane model returns one, so it is the server's fault.
  if (sumSquares === 0) throw new RetryableError(`embedding service at ${url} answered an all-zero embedding ${at}`);
  const inv = 1 / Math.sqrt(sumSquares);
  for (let i = 0; i < v.length; i++) v[i] = v[i]! * inv;
  return v;
}

