import { z } from 'zod';
import { MemoryCandidate } from '@memstream/contracts';
import { localRateLimiter, postToProvider, providerEndpoint, type ProviderCallPolicy, type RateLimiter } from '@memstream/embedder';
import { RetryableError } from '@memstream/kit';
import type { ExtractionInput, ExtractionResult, MemoryExtractor } from './port.js';

export interface ChatExtractorOptions {
  /** The API root up to and including /v1: https://api.openai.com/v1, http://localhost:11434/v1 (Ollama)… */
  baseUrl: string;
  /** Sent as "Authorization: Bearer …"; omit for local servers that need none. */
  apiKey?: string | undefined;
  model: string;
  /** One request's deadline, body included (default 60 s); a timeout is retried. */
  timeoutMs?: number | undefined;
  /** Retries of one request on 408, 429, 5xx and network errors (default 3). */
  maxRetries?: number | undefined;
  baseBackoffMs?: number | undefined;
  /** Longest wait for a backoff or a server's Retry-After (default 30 s); a longer one fails the call as retryable. */
  maxBackoffMs?: number | undefined;
  /** A local token bucket of this many requests per second; ignored when `rateLimiter` is given. */
  requestsPerSecond?: number | undefined;
  burst?: number | undefined;
  /** A limiter shared with other replicas (kvRateLimiter); takes precedence over requestsPerSecond. */
  rateLimiter?: RateLimiter | undefined;
}

/** What the model must answer: the candidates, in the shape the log records them. */
export const ChatExtractionOutput = z.object({ memories: z.array(MemoryCandidate).max(500) });

/** The chat-completions answer, as far as it is read. */
const ChatCompletion = z.object({
  choices: z.array(z.object({ message: z.object({ content: z.string().nullable() }) })).min(1),
  usage: z.object({ total_tokens: z.number().int().nonnegative() }).partial().optional(),
});

const SYSTEM_PROMPT = `You extract memories from content for a memory service.
Answer with one JSON object and nothing else: {"memories": [ ... ]}. Each memory is
{"memory": string, "isStatic": boolean, "attribute": {"subject": string, "key": string, "value": string} | null,
 "action": "remember" | "forget", "eventDates": [ISO 8601], "forgetAfter": ISO 8601 | null,
 "sourceText": string | null, "updates": [id], "extends": [id]}.
Rules:
- One self-contained statement per memory, in the third person, naming the subject ("Priya Raman lives in Berlin."), never "I" or "he".
- Use the entityContext and existing memories to name the subject; the user's subject key is "user".
- attribute: for lasting facts with one value at a time use these keys: name, lives_in, works_at, role, timezone, diet, pronouns, family:<relation>; else null.
- isStatic: true for lasting facts about the subject (identity, home, job, family, preferences); false for episodes.
- action "forget" when the content says an attribute no longer holds ("I no longer live in Lisbon").
- Resolve relative dates against documentDate into eventDates; set forgetAfter only for plainly temporary facts (an exam, an appointment), a day after them.
- updates / extends: ids of existing memories this one replaces / adds detail to; only ids given to you.
- In a conversation, read only the user's turns; never make memories of what the assistant said.
- No memory for questions, greetings or chit-chat.`;

/**
 * Memories extracted by any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM,
 * llama.cpp server). The request asks for a JSON object (`response_format: json_object`) and
 * the answer is validated with zod (ChatExtractionOutput); an invalid answer is sent back once
 * with the problems found, and a second invalid answer fails the call as retryable (the message
 * is redelivered later, then dead-lettered: the document stays searchable either way). HTTP
 * errors, timeouts, 429 and Retry-After are handled like the embedder's (postToProvider), and
 * every request, retries included, draws from the rate limiter — shared by every replica when
 * it is the KV one. Tokens are the sum of `usage.total_tokens` over the requests made.
 */
export class ChatCompletionsExtractor implements MemoryExtractor {
  readonly name: string;
  private readonly url: string;
  private readonly policy: ProviderCallPolicy;

  constructor(private readonly options: ChatExtractorOptions) {
    if (options.model.trim() === '') throw new RangeError('ChatCompletionsExtractor: model must not be empty');
    this.url = providerEndpoint('ChatCompletionsExtractor', options.baseUrl, '/chat/completions');
    this.name = `llm:${options.model}`;
    this.policy = {
      maxRetries: options.maxRetries ?? 3,
      timeoutMs: options.timeoutMs ?? 60_000,
      baseBackoffMs: options.baseBackoffMs ?? 500,
      maxBackoffMs: options.maxBackoffMs ?? 30_000,
      limiter: options.rateLimiter ?? (options.requestsPerSecond === undefined ? undefined : localRateLimiter(options.requestsPerSecond, options.burst ?? 1)),
    };
  }

  async extract(input: ExtractionInput): Promise<ExtractionResult> {
    const shown = new Set(input.existing.map((m) => m.id));
    const system = input.filterPrompt ? `${SYSTEM_PROMPT}\n- Keep only what this filter allows: ${input.filterPrompt}` : SYSTEM_PROMPT;
    const messages: Array<{ role: 'system' | 'user' | 'assistant'; content: string }> = [
      { role: 'system', content: system },
      {
        role: 'user',
        content: JSON.stringify({
          documentDate: input.documentDate,
          entityContext: input.entityContext,
          existing: input.existing.map((m) => ({ id: m.id, memory: m.memory, isStatic: m.isStatic, attribute: m.attribute })),
          format: input.format,
          content: input.text,
        }),
      },
    ];
    let tokens = 0;
    for (let attempt = 0; attempt < 2; attempt++) {
      const answer = await this.complete(messages);
      tokens += answer.tokens;
      const problem = validate(answer.content);
      if (problem.ok) {
        // A model may name ids it was not shown: they cannot be resolved, so they are dropped here.
        const candidates = problem.value.memories.map((c) => ({
          ...c,
          eventDates: c.eventDates.map(iso),
          forgetAfter: c.forgetAfter === null ? null : iso(c.forgetAfter),
          updates: c.updates.filter((id) => shown.has(id)),
          extends: c.extends.filter((id) => shown.has(id)),
        }));
        return { candidates, tokens };
      }
      messages.push({ role: 'assistant', content: answer.content }, { role: 'user', content: `That answer is not valid: ${problem.error}. Answer again with only the JSON object.` });
      if (attempt === 1) throw new RetryableError(`chat model ${this.options.model} at ${this.url} answered invalid output twice: ${problem.error}`);
    }
    throw new Error('unreachable');
  }

  private async complete(messages: Array<{ role: string; content: string }>): Promise<{ content: string; tokens: number }> {
    const body = JSON.stringify({ model: this.options.model, messages, temperature: 0, response_format: { type: 'json_object' } });
    const text = await postToProvider(this.url, this.options.apiKey || undefined, body, this.policy, { kind: 'chat', model: this.options.model });
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new RetryableError(`chat service at ${this.url} answered 200 with a body that is not JSON: ${text.slice(0, 200)}`);
    }
    const parsed = ChatCompletion.safeParse(json);
    if (!parsed.success) throw new RetryableError(`chat service at ${this.url} answered 200 without a chat completion: ${text.slice(0, 200)}`);
    return { content: parsed.data.choices[0]!.message.content ?? '', tokens: parsed.data.usage?.total_tokens ?? 0 };
  }
}

/** The model's content as ChatExtractionOutput, or what is wrong with it (sent back to the model). */
function validate(content: string): { ok: true; value: z.infer<typeof ChatExtractionOutput> } | { ok: false; error: string } {
  let json: unknown;
  try {
    // Some servers wrap JSON in a Markdown fence even when asked for a JSON object.
    json = JSON.parse(content.replace(/^\s*```(?:json)?\s*|\s*```\s*$/g, ''));
  } catch (err) {
    return { ok: false, error: `not JSON (${(err as Error).message})` };
  }
  const r = ChatExtractionOutput.safeParse(json);
  if (!r.success) return { ok: false, error: r.error.issues.slice(0, 5).map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ') };
  const badDate = r.data.memories.flatMap((m) => [...m.eventDates, ...(m.forgetAfter ? [m.forgetAfter] : [])]).find((d) => !Number.isFinite(Date.parse(d)));
  if (badDate !== undefined) return { ok: false, error: `${JSON.stringify(badDate)} is not an ISO 8601 date` };
  return { ok: true, value: r.data };
}

const iso = (d: string) => new Date(d).toISOString();
