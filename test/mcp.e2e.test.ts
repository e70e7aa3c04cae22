import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { SERVICES } from '@memstream/cli';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';
import { unique } from './support/sdk.js';

const ROOT = path.resolve(import.meta.dirname, '..');

async function httpClient(stack: TestStack, key: string): Promise<Client> {
  const client = new Client({ name: 'mcp-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', stack.baseUrl), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

/** `./memstream mcp` as a desktop client launches it: a child process speaking MCP on stdio. */
async function stdioClient(stack: TestStack, key: string): Promise<Client> {
  const client = new Client({ name: 'mcp-e2e-stdio', version: '1.0.0' });
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', MEMSTREAM_URL: stack.baseUrl, MEMSTREAM_API_KEY: key };
  await client.connect(new StdioClientTransport({ command: process.execPath, args: ['--import', 'tsx', 'packages/cli/src/main.ts', 'mcp'], cwd: ROOT, env, stderr: 'inherit' }));
  return client;
}

const call = async (c: Client, name: string, args: Record<string, unknown>) => (await c.callTool({ name, arguments: args })) as CallToolResult;
const text = (r: CallToolResult) => r.content.map((p) => (p.type === 'text' ? p.text : '')).join('\n');

describe('MCP server: the SDK client over Streamable HTTP (/mcp) and stdio (./memstream mcp)', () => {
  let stack: TestStack;
  let admin: Client;
  let scopedKey: string;
  const tagA = unique('mcp-a');
  const tagB = unique('mcp-b');

  beforeAll(async () => {
    // No notifier: MCP does not use lifecycle events, and one process fewer starts faster on a busy machine.
    stack = await startTestStack({ services: SERVICES.filter((s) => s !== 'notifier') });
    admin = await httpClient(stack, stack.apiKey);
    const k = await api(stack).call('POST', '/v3/auth/scoped-key', { containerTags: [tagB], name: 'agent b' });
    expect(k.status).toBe(200);
    scopedKey = k.body.key;
  }, 180_000);
  afterAll(async () => {
    await admin?.close();
    await stack?.teardown();
  });

  /** The document of a saved memory, once the pipeline has made it searchable. */
  const done = (id: string) => waitFor(`${id} done`, async () => ((await api(stack).get(id)).body?.status === 'done' ? true : undefined), 60_000, 100);

  it('lists the tools and the profile resource template, and refuses a request without a key', async () => {
    const { tools } = await admin.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['add_memory', 'fetch_document', 'listMemories', 'list_documents', 'search_memory', 'whoAmI']);
    expect(tools.find((t) => t.name === 'search_memory')?.outputSchema).toBeDefined();
    const { resourceTemplates } = await admin.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(['memstream://profile/{containerTag}']);

    const anon = await fetch(`${stack.baseUrl}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' });
    expect(anon.status).toBe(401);
    expect(await anon.json()).toMatchObject({ error: 'Unauthorized' });
    expect((await fetch(`${stack.baseUrl}/mcp`, { headers: { authorization: `Bearer ${stack.apiKey}` } })).status).toBe(405);
  });

  it('saves a memory with add_memory, finds it with search_memory, reads the profile, lists, fetches and forgets it', async () => {
    const saved = await call(admin, 'add_memory', { content: 'The user prefers green tea to coffee in the morning.', containerTag: tagA });
    expect(saved.isError).toBeFalsy();
    const { id } = saved.structuredContent as { id: string; action: string };
    expect(saved.structuredContent).toMatchObject({ action: 'save', status: 'queued' });
    expect(text(saved)).toContain(id);
    await done(id);

    const found = await call(admin, 'search_memory', { query: 'green tea morning', containerTag: tagA, includeProfile: true });
    const s = found.structuredContent as { results: { documentId: string; memory: string; similarity: number }[]; profile: { documentCount: number; containerTag: string } };
    // The memorizer may already have learned the statement, and a memory can rank before its passage.
    expect(s.results.find((r) => (r as { kind?: string }).kind === 'passage')).toMatchObject({ kind: 'passage', documentId: id, memory: expect.stringContaining('green tea') });
    expect(s.profile).toMatchObject({ containerTag: tagA, documentCount: 1 });
    expect(text(found)).toMatch(/^1\. \[\d\.\d\d\] The user prefers green tea/);

    const profile = await admin.readResource({ uri: `memstream://profile/${tagA}` });
    expect(JSON.parse((profile.contents[0] as { text: string }).text)).toMatchObject({ containerTag: tagA, documentCount: 1, recentDocuments: [{ id }] });

    const docs = await call(admin, 'list_documents', { containerTag: tagA, status: 'done' });
    expect(docs.structuredContent).toMatchObject({ total: 1, documents: [{ id }] });
    expect((await call(admin, 'list_documents', { containerTag: tagA, status: 'failed' })).structuredContent).toMatchObject({ total: 0 });
    const fetched = await call(admin, 'fetch_document', { id });
    expect(fetched.structuredContent).toMatchObject({ id, status: 'done', content: 'The user prefers green tea to coffee in the morning.', truncated: false });

    // Forget by the same text: that memory goes, and search no longer finds it.
    const forgot = await call(admin, 'add_memory', { content: 'The user prefers green tea to coffee in the morning.', containerTag: tagA, action: 'forget' });
    expect(forgot.structuredContent).toMatchObject({ action: 'forget', id, forgotten: expect.stringContaining('green tea') });
    expect((await api(stack).get(id)).status).toBe(404);
    const nothing = await call(admin, 'add_memory', { content: 'something never saved about volcanoes', containerTag: tagA, action: 'forget' });
    expect(nothing.structuredContent).toMatchObject({ action: 'forget', id: null });
  }, 90_000);

  it('with the memory layer: listMemories, the profile and search show what was learned from a saved memory', async () => {
    const tagC = unique('mcp-c');
    const saved = await call(admin, 'add_memory', { content: 'I live in Lisbon.', containerTag: tagC });
    await done((saved.structuredContent as { id: string }).id);
    // The memorizer learns after indexing: wait until the statement is a memory.
    const learned = await waitFor(
      'a memory learned',
      async () => {
        const sc = (await call(admin, 'listMemories', { containerTag: tagC })).structuredContent as { source: string; memories: { memory: string; isStatic: boolean }[] };
        return sc.memories.length ? sc : undefined;
      },
      60_000,
      250,
    );
    expect(learned).toMatchObject({ source: 'memory-layer', memories: [{ memory: 'The user lives in Lisbon.', isStatic: true }] });
    const profile = await admin.readResource({ uri: `memstream://profile/${tagC}` });
    expect(JSON.parse((profile.contents[0] as { text: string }).text)).toMatchObject({ static: ['The user lives in Lisbon.'], documentCount: 1 });
    const found = await call(admin, 'search_memory', { query: 'Lisbon', containerTag: tagC });
    expect((found.structuredContent as { results: { kind: string; memory: string }[] }).results).toContainEqual(expect.objectContaining({ kind: 'memory', memory: 'The user lives in Lisbon.' }));
  }, 90_000);

  it('answers bad input as a tool error, not a protocol failure', async () => {
    const empty = await call(admin, 'add_memory', { content: '' });
    expect(empty.isError).toBe(true);
    expect(text(empty)).toMatch(/content/);
    const badTag = await call(admin, 'search_memory', { query: 'x', containerTag: 'no spaces allowed' });
    expect(badTag.isError).toBe(true);
    expect(text(badTag)).toMatch(/containerTag/);
    const missing = await call(admin, 'fetch_document', { id: 'no-such-document' });
    expect(missing.isError).toBe(true);
    expect(text(missing)).toMatch(/Document not found/);
  });

  it('with a scoped key over stdio: confined to its tag', async () => {
    const other = await call(admin, 'add_memory', { content: 'Project A launch date is the ninth of March.', containerTag: tagA });
    const otherId = (other.structuredContent as { id: string }).id;
    const agent = await stdioClient(stack, scopedKey);
    try {
      expect((await agent.listTools()).tools).toHaveLength(6);
      expect((await call(agent, 'whoAmI', {})).structuredContent).toMatchObject({ kind: 'scoped', containerTags: [tagB] });

      // Saved without naming a tag: the key's only tag.
      const saved = await call(agent, 'add_memory', { content: 'Project B launch date is the second of June.' });
      const { id } = saved.structuredContent as { id: string };
      await done(id);
      await done(otherId);
      expect((await api(stack).get(id)).body.containerTags).toEqual([tagB]);

      const mine = await call(agent, 'search_memory', { query: 'project launch date' });
      const hits = (mine.structuredContent as { results: { documentId: string }[] }).results.map((h) => h.documentId);
      expect(hits).toContain(id);
      expect(hits).not.toContain(otherId);

      // Another tag: refused, for reads and writes; another tag's document is as if absent.
      const read = await call(agent, 'search_memory', { query: 'launch date', containerTag: tagA });
      expect(read.isError).toBe(true);
      expect(text(read)).toMatch(/Forbidden/);
      const write = await call(agent, 'add_memory', { content: 'sneaky', containerTag: tagA });
      expect(write.isError).toBe(true);
      expect((await call(agent, 'fetch_document', { id: otherId })).isError).toBe(true);
      expect((await call(agent, 'listMemories', { containerTag: tagA })).isError).toBe(true);
      // Forget another tag's memory: not found in its scope; nor is its own, similar but different, one taken instead.
      const forget = await call(agent, 'add_memory', { content: 'Project A launch date is the ninth of March.', action: 'forget' });
      expect(forget.structuredContent).toMatchObject({ id: null });
      expect(text(forget)).toMatch(/closest .*Project B launch date/);
      expect((await api(stack).get(otherId)).status).toBe(200);
      expect((await api(stack).get(id)).status).toBe(200);
      // Nearly the same words: forgotten.
      const own = await call(agent, 'add_memory', { content: 'project B launch date is the second of june', action: 'forget' });
      expect(own.structuredContent).toMatchObject({ action: 'forget', id });
      expect((await api(stack).get(id)).status).toBe(404);
    } finally {
      await agent.close();
    }
  }, 90_000);
});
