import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { checkEmbedderEnv, embedderConfigFrom, embedderEnv, sharedRateLimitFrom } from './env.js';
import { loadEmbedder } from './index.js';
import { rateLimitKey, type RateLimiter } from './rate-limit.js';

const Schema = z.object(embedderEnv).superRefine(checkEmbedderEnv);
const parse = (env: Record<string, string>) => Schema.parse(env);

describe('embedding settings from the environment', () => {
  it('defaults to the static model when EMBEDDER is unset', () => {
    expect(embedderConfigFrom(parse({}))).toEqual({ kind: 'static' });
    expect(parse({}).EMBEDDER).toBe('static');
  });

  it('keeps the 384 default for hashed and openai while EMBEDDING_DIM is unset, and leaves onnx to the model', () => {
    expect(embedderConfigFrom(parse({ EMBEDDER: 'hashed' }))).toEqual({ kind: 'hashed', dim: 384 });
    expect(embedderConfigFrom(parse({ EMBEDDER: 'hashed', EMBEDDING_DIM: '' }))).toEqual({ kind: 'hashed', dim: 384 });
    expect(embedderConfigFrom(parse({ EMBEDDER: 'hashed', EMBEDDING_DIM: '256' }))).toEqual({ kind: 'hashed', dim: 256 });
    expect(embedderConfigFrom(parse({ EMBEDDER: 'openai', EMBEDDING_MODEL: 'm' }))).toMatchObject({ kind: 'openai', dim: 384, burst: 1 });
  });

  it('asks for a shared limit only for openai with EMBEDDING_RPS and the shared scope (the default)', () => {
    const base = { EMBEDDER: 'openai', EMBEDDING_MODEL: 'text-embedding-3-small', EMBEDDING_RPS: '5', EMBEDDING_BURST: '4' };
    expect(sharedRateLimitFrom(parse(base))).toEqual({ key: rateLimitKey('https://api.openai.com/v1', 'text-embedding-3-small'), rps: 5, burst: 4 });
    expect(sharedRateLimitFrom(parse({ ...base, EMBEDDING_RATE_SCOPE: 'process' }))).toBeUndefined();
    expect(sharedRateLimitFrom(parse({ ...base, EMBEDDING_RPS: '' }))).toBeUndefined();
    expect(sharedRateLimitFrom(parse({}))).toBeUndefined();
    expect(() => parse({ ...base, EMBEDDING_RATE_SCOPE: 'cluster' })).toThrow();
  });

  it('gives one KV-safe key per endpoint and model, the same however the URL ends', () => {
    const k = rateLimitKey('http://127.0.0.1:11434/v1', 'nomic-embed-text');
    expect(k).toMatch(/^embeddings\.[0-9a-f]{24}$/);
    expect(rateLimitKey('http://127.0.0.1:11434/v1/', 'nomic-embed-text')).toBe(k);
    expect(rateLimitKey('http://127.0.0.1:11434/v1', 'other-model')).not.toBe(k);
    expect(rateLimitKey('http://10.0.0.2:11434/v1', 'nomic-embed-text')).not.toBe(k);
  });

  it('loadEmbedder puts the given limiter in front of every openai request', async () => {
    let acquired = 0;
    const limiter: RateLimiter = { acquire: async (n) => void (acquired += n) };
    // Port 1 refuses connections: the request fails, but only after the limiter was asked.
    const e = await loadEmbedder({ kind: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm', dim: 16, maxRetries: 1, baseBackoffMs: 1 }, { rateLimiter: limiter });
    await expect(e.embed(['x'])).rejects.toThrow(/unreachable/);
    expect(acquired).toBe(2);
  });
});
