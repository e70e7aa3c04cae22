import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OfflineExtractor } from '../offline.js';

/** One scripted answer, served before the "model" answers for real. */
export interface ScriptedAnswer {
  status?: number;
  headers?: Record<string, string>;
  /** The message content of a 200 chat completion (e.g. invalid JSON), or a raw body for another status. */
  content?: string;
  /** Hold the answer this long (a timeout test). */
  delayMs?: number;
}

export interface FakeChatServer {
  /** The API root to configure, up to /v1. */
  baseUrl: string;
  /** Every request body received, parsed. */
  requests: Array<{ model: string; messages: Array<{ role: string; content: string }>; response_format?: unknown }>;
  /** Answers served, in order, before the model answers (each once). */
  script: ScriptedAnswer[];
  close(): Promise<void>;
}

async function bodyOf(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const p of req) parts.push(p as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

/**
 * A test-only OpenAI-compatible chat-completions server on loopback (real HTTP), for the chat
 * extractor's tests. Its "model" is the offline rules: it reads the JSON the extractor sends as
 * the user message and answers `{"memories": [...]}` with what OfflineExtractor finds, with a
 * `usage` block, so the extractor contract suite holds for both adapters. `script` makes it
 * answer errors, 429s with Retry-After, invalid output or slow answers first.
 */
export async function startFakeChatServer(): Promise<FakeChatServer> {
  const rules = new OfflineExtractor();
  const requests: FakeChatServer['requests'] = [];
  const script: ScriptedAnswer[] = [];
  const server: Server = createServer((req, res) => {
    void (async () => {
      const raw = await bodyOf(req);
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found' } }));
        return;
      }
      const body = JSON.parse(raw) as FakeChatServer['requests'][number];
      requests.push(body);
      const completion = (content: string) => JSON.stringify({ id: `chatcmpl-${requests.length}`, object: 'chat.completion', model: body.model, choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 } });
      const next = script.shift();
      if (next) {
        if (next.delayMs) await new Promise((r) => setTimeout(r, next.delayMs));
        const status = next.status ?? 200;
        res.writeHead(status, { 'content-type': 'application/json', ...next.headers }).end(status === 200 ? completion(next.content ?? '') : (next.content ?? JSON.stringify({ error: { message: `status ${status}` } })));
        return;
      }
      const user = body.messages.find((m) => m.role === 'user');
      const input = JSON.parse(user?.content ?? '{}') as {
        documentDate: string;
        entityContext: string | null;
        format: 'plain' | 'markdown' | 'conversation';
        content: string;
        existing: Array<{ attribute: { subject: string; key: string; value: string } | null }>;
      };
      // The rules take the user's name from existing memories; here it is handed over as context.
      const name = input.existing.find((e) => e.attribute?.subject === 'user' && e.attribute.key === 'name')?.attribute?.value;
      const entityContext = name ? `Notes about ${name}` : input.entityContext;
      const { candidates } = await rules.extract({ text: input.content, format: input.format, documentDate: input.documentDate, entityContext, existing: [] });
      res.writeHead(200, { 'content-type': 'application/json' }).end(completion(JSON.stringify({ memories: candidates })));
    })().catch((err: unknown) => {
      res.writeHead(500).end(String(err));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    script,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
