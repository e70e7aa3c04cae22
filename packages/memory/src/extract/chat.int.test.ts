import { afterEach, describe, expect, it } from 'vitest';
import { PermanentError, RetryableError } from '@memstream/kit';
import { ChatCompletionsExtractor } from './chat.js';
import { describeMemoryExtractorContract } from './contract.js';
import { startFakeChatServer, type FakeChatServer } from './testing/chat-server.js';

describeMemoryExtractorContract('chat completions (loopback server)', async () => {
  const server = await startFakeChatServer();
  return { extractor: new ChatCompletionsExtractor({ baseUrl: server.baseUrl, model: 'fake-model' }), cleanup: () => server.close() };
});

const input = { text: 'I live in Lisbon.', format: 'plain' as const, documentDate: '2026-03-10T09:00:00.000Z', entityContext: null, existing: [] };

describe('ChatCompletionsExtractor', () => {
  let server: FakeChatServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });
  const open = async (extra: Partial<ConstructorParameters<typeof ChatCompletionsExtractor>[0]> = {}) => {
    server = await startFakeChatServer();
    return new ChatCompletionsExtractor({ baseUrl: server.baseUrl, model: 'fake-model', apiKey: 'sk-test', baseBackoffMs: 5, ...extra });
  };

  it('asks for a JSON object and counts the tokens the server reports', async () => {
    const x = await open();
    const { candidates, tokens } = await x.extract(input);
    expect(x.name).toBe('llm:fake-model');
    expect(candidates.map((c) => c.attribute?.value)).toContain('Lisbon');
    expect(tokens).toBe(120);
    expect(server!.requests[0]).toMatchObject({ model: 'fake-model', response_format: { type: 'json_object' } });
  });

  it('sends an invalid answer back once with what is wrong, then takes the valid one (tokens of both)', async () => {
    const x = await open();
    server!.script.push({ content: '{"memories": [{"memory": 42}]}' });
    const { candidates, tokens } = await x.extract(input);
    expect(candidates.length).toBeGreaterThan(0);
    expect(tokens).toBe(240);
    const retry = server!.requests[1]!.messages;
    expect(retry.at(-2)).toMatchObject({ role: 'assistant', content: '{"memories": [{"memory": 42}]}' });
    expect(retry.at(-1)!.content).toMatch(/not valid: memories\.0\.memory/);
  });

  it('two invalid answers fail the call as retryable (the message is redelivered later)', async () => {
    const x = await open();
    server!.script.push({ content: 'Sure! Here are the memories:' }, { content: '{"memories": [{"memory": "x", "isStatic": true, "attribute": null, "eventDates": ["last week"]}]}' });
    await expect(x.extract(input)).rejects.toThrow(RetryableError);
    expect(server!.requests).toHaveLength(2);
  });

  it('honours 429 Retry-After and retries 5xx; a 401 is permanent', async () => {
    const x = await open();
    server!.script.push({ status: 429, headers: { 'retry-after-ms': '30' } }, { status: 503 });
    expect((await x.extract(input)).candidates.length).toBeGreaterThan(0);
    expect(server!.requests).toHaveLength(3);
    server!.script.push({ status: 429, headers: { 'retry-after': '120' } });
    // Longer than maxBackoffMs: not waited for in the worker; the broker redelivers later.
    await expect(x.extract(input)).rejects.toMatchObject({ retryAfterMs: 120_000 });
    server!.script.push({ status: 401, content: '{"error":{"message":"bad key"}}' });
    await expect(x.extract(input)).rejects.toThrow(PermanentError);
  });

  it('times out a stalled answer and retries it', async () => {
    const x = await open({ timeoutMs: 200, maxRetries: 1 });
    server!.script.push({ delayMs: 1_000, content: '{"memories": []}' });
    expect((await x.extract(input)).candidates.length).toBeGreaterThan(0);
    expect(server!.requests).toHaveLength(2);
  });

  it('draws every request, retries included, from the rate limiter it is given (the shared KV one in services)', async () => {
    let acquired = 0;
    const x = await open({ rateLimiter: { acquire: async (n) => void (acquired += n) } });
    server!.script.push({ status: 500 });
    await x.extract(input);
    expect(acquired).toBe(2);
  });
});

describe('ChatCompletionsExtractor and the key settings', () => {
  it('tells the model the filterPrompt', async () => {
    const server = await startFakeChatServer();
    try {
      const x = new ChatCompletionsExtractor({ baseUrl: server.baseUrl, model: 'fake-model' });
      await x.extract({ ...input, filterPrompt: 'only health facts' });
      expect(server.requests[0]!.messages[0]!.content).toContain('only health facts');
    } finally {
      await server.close();
    }
  });
});
