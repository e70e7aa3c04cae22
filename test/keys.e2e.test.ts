import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Supermemory, { NotFoundError, PermissionDeniedError } from 'supermemory';
import { spawnService, stopProcess, type ServiceProcess } from '@memstream/cli';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';
import { recordingClient, unique, waitForDoc } from './support/sdk.js';

/**
 * Scoped API keys through the whole of memstream: keys made by the admin API, used by the
 * official SDK against real service processes; a second gateway process as another replica.
 */
describe('scoped API keys end to end', () => {
  let stack: TestStack;
  const tagA = unique('tenant-a');
  const tagB = unique('tenant-b');

  beforeAll(async () => {
    stack = await startTestStack({ services: ['projection', 'extractor', 'chunker', 'embedder', 'indexer', 'gateway'] });
  }, 60_000);
  afterAll(async () => {
    await stack?.teardown();
  });

  async function createKey(body: Record<string, unknown>, baseUrl = stack.baseUrl): Promise<{ id: string; key: string }> {
    const r = await api({ baseUrl, apiKey: stack.apiKey }).call('POST', '/v3/auth/scoped-key', body);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body as { id: string; key: string };
  }

  it('search isolation through the pipeline: the SDK with a key for A never sees B', { timeout: 60_000 }, async () => {
    const adminClient = recordingClient(stack).client;
    const { key } = await createKey({ containerTag: tagA });
    const a = recordingClient(stack, { apiKey: key }).client;
    // B's documents, by the admin; A's, by the scoped key without naming a tag (it gets its own).
    const bIds = await Promise.all([1, 2, 3].map(async (i) => (await adminClient.documents.add({ content: `The harbour ledger page ${i}: tide tables and mooring fees.`, containerTag: tagB })).id));
    const aIds = await Promise.all([1, 2, 3].map(async (i) => (await a.documents.add({ content: `The harbour ledger page ${i}: cargo manifests and crew lists.` })).id));
    for (const id of [...aIds, ...bIds]) await waitForDoc(adminClient, id, 'done', (d) => d.status === 'done', 30_000);
    expect((await a.documents.get(aIds[0]!)).containerTags).toEqual([tagA]);

    // The admin finds both tenants' pages for the query.
    const both = await adminClient.search.documents({ q: 'harbour ledger tide tables mooring', containerTags: [tagA, tagB], limit: 20 });
    expect(both.results.some((r) => bIds.includes(r.documentId))).toBe(true);

    const v3 = await a.search.documents({ q: 'harbour ledger tide tables mooring', limit: 20 });
    expect(v3.results.map((r) => r.documentId).sort()).toEqual([...aIds].sort());
    const v4 = await a.search.memories({ q: 'harbour ledger tide tables mooring', searchMode: 'documents', limit: 20 });
    expect(v4.results.length).toBeGreaterThan(0);
    expect(v4.results.every((r) => aIds.includes((r as { documents?: Array<{ id: string }> }).documents?.[0]?.id ?? ''))).toBe(true);
    const listed = await a.documents.list({ limit: 100 });
    expect(listed.memories.map((m) => m.id).sort()).toEqual([...aIds].sort());
    for (const id of bIds) await expect(a.documents.get(id)).rejects.toBeInstanceOf(NotFoundError);
    // Naming B: 403, in the SDK's own error class.
    await expect(a.search.documents({ q: 'harbour', containerTag: tagB })).rejects.toBeInstanceOf(PermissionDeniedError);
    await expect(a.documents.add({ content: 'into B', containerTag: tagB })).rejects.toBeInstanceOf(PermissionDeniedError);
  });

  it('the SDK retries a 429 after the wait the server names (retry-after-ms)', { timeout: 60_000 }, async () => {
    // 2 requests per second: a third at once must wait about half a second.
    const { key } = await createKey({ containerTag: tagA, rateLimitMax: 2, rateLimitTimeWindow: 1000 });
    const seen: Array<{ status: number; at: number; retryAfterMs: number | null }> = [];
    const client = new Supermemory({
      apiKey: key,
      baseURL: stack.baseUrl,
      maxRetries: 3,
      fetch: async (input: string | URL | Request, init?: RequestInit) => {
        const res = await fetch(input, init);
        const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
        if (url.startsWith(stack.baseUrl)) seen.push({ status: res.status, at: performance.now(), retryAfterMs: res.headers.get('retry-after-ms') === null ? null : Number(res.headers.get('retry-after-ms')) });
        return res;
      },
    });
    const started = performance.now();
    for (let i = 0; i < 4; i++) await client.documents.list({ limit: 1 });
    const elapsed = performance.now() - started;
    const statuses = seen.map((s) => s.status);
    console.log(`4 SDK calls with a 2/s key: answers ${statuses.join(', ')} in ${elapsed.toFixed(0)} ms; waits asked: ${seen.filter((s) => s.retryAfterMs !== null).map((s) => s.retryAfterMs).join(', ')} ms`);
    expect(statuses.filter((s) => s === 200)).toHaveLength(4);
    expect(statuses).toContain(429);
    // Every 429 was followed by a retry no sooner than the wait it named.
    for (let i = 0; i < seen.length; i++) {
      const s = seen[i]!;
      if (s.status !== 429) continue;
      expect(s.retryAfterMs).toBeGreaterThan(0);
      const next = seen[i + 1]!;
      // The response is recorded after its headers arrive, so the gap is at least the sleep the SDK took.
      expect(next.at - s.at).toBeGreaterThanOrEqual(s.retryAfterMs! - 5);
    }
  });

  it('a key revoked through one gateway process is refused by another: figures', { timeout: 60_000 }, async () => {
    let second: ServiceProcess | undefined;
    try {
      second = await spawnService('gateway', { env: stack.env });
      const otherUrl = second.url!;
      const lags: number[] = [];
      for (let i = 0; i < 10; i++) {
        const { id, key } = await createKey({ containerTag: tagA });
        const other = api({ baseUrl: otherUrl, apiKey: key });
        expect((await other.call('POST', '/v3/documents/list', {})).status).toBe(200);
        expect((await api(stack).call('DELETE', `/v3/auth/scoped-key/${id}`)).status).toBe(200);
        const t0 = performance.now();
        const r = await waitFor('the revoked key refused by the other gateway', async () => {
          const x = await other.call('POST', '/v3/documents/list', {});
          return x.status === 401 ? x : undefined;
        }, 5_000, 1);
        lags.push(performance.now() - t0);
        expect(r.body).toMatchObject({ error: 'API key revoked' });
        // And on the gateway that revoked it.
        expect((await api({ baseUrl: stack.baseUrl, apiKey: key }).call('POST', '/v3/documents/list', {})).status).toBe(401);
      }
      lags.sort((x, y) => x - y);
      console.log(`revocation, two gateway processes: refused by the other within p50 ${lags[5]!.toFixed(1)} ms, max ${lags.at(-1)!.toFixed(1)} ms of the DELETE's answer (n=${lags.length})`);
    } finally {
      if (second) await stopProcess(second.child, 'SIGTERM', 10_000);
    }
  });
});
