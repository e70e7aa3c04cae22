import { createHash } from 'node:crypto';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { DocumentStatus, type DocumentListItem, type DocumentResponse } from '@memstream/contracts';
import type { MemoryBackend } from './port.js';

export const SERVER_INFO = { name: 'memstream', version: '0.1.0' };

/**
 * add_memory's forget removes a memory found by search only when its words are nearly the words
 * given (Jaccard of the word sets). Not the search score: that is a rank measure, and the only
 * candidate in a tag ranks first, however different it is (docs/mcp.md).
 */
export const FORGET_MIN_OVERLAP = 0.7;

const words = (s: string) => new Set(s.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);

/** |A ∩ B| / |A ∪ B| of the two texts' words. */
export function wordOverlap(a: string, b: string): number {
  const wa = words(a);
  const wb = words(b);
  if (wa.size === 0 && wb.size === 0) return 1;
  let both = 0;
  for (const w of wa) if (wb.has(w)) both++;
  return both / (wa.size + wb.size - both);
}
/** A fetched document's content is cut here, so one tool answer cannot flood an agent's context. */
export const MAX_FETCH_CHARS = 50_000;

const Tag = z.string().min(1).max(100).describe('container tag (a user, project or agent); a scoped API key may only name its own');

/** The customId of a saved memory: the same text in the same tag is the same memory (saving it twice changes nothing). */
export function memoryCustomId(content: string, tag: string | undefined): string {
  return 'mcp_' + createHash('sha256').update(`${tag ?? ''}\n${content.trim()}`).digest('base64url').slice(0, 32);
}

/** A tool error for the agent to read: the server's {error, details}, never a protocol failure. */
function toolError(err: unknown): CallToolResult {
  const e = err as { message?: string; details?: string; httpStatus?: number };
  const text = e.details ? `${e.message}: ${e.details}` : String(e.message ?? err);
  return { isError: true, content: [{ type: 'text', text }] };
}

function result<T extends Record<string, unknown>>(structured: T, text: string): CallToolResult {
  return { structuredContent: structured, content: [{ type: 'text', text }] };
}

const MemoryHit = z.object({
  id: z.string(),
  /** memory: a statement the memory layer learned (id mem_…); passage: a chunk of a document. */
  kind: z.enum(['memory', 'passage']),
  memory: z.string(),
  similarity: z.number(),
  documentId: z.string().nullable(),
  title: z.string().nullable(),
  updatedAt: z.string(),
});
const Profile = z.object({
  containerTag: z.string().nullable(),
  /** From the memory layer (/v4/profile): lasting facts, and the latest other memories. Empty without it. */
  static: z.array(z.string()),
  dynamic: z.array(z.string()),
  documentCount: z.number(),
  recentDocuments: z.array(z.object({ id: z.string(), title: z.string().nullable(), summary: z.string().nullable(), updatedAt: z.string() })),
});
type Profile = z.infer<typeof Profile>;
const DocSummary = z.object({
  id: z.string(),
  customId: z.string().nullable(),
  title: z.string().nullable(),
  status: z.string(),
  type: z.string(),
  containerTags: z.array(z.string()),
  createdAt: z.string(),
  updatedAt: z.string(),
});

/** A document's summary, else the start of its text (list asks for content). */
const summaryOf = (d: DocumentListItem) => d.summary ?? (typeof d.content === 'string' ? d.content.slice(0, 280) : null);

const summarise = (d: DocumentListItem) => ({ id: d.id, customId: d.customId, title: d.title, status: d.status, type: d.type, containerTags: d.containerTags, createdAt: d.createdAt, updatedAt: d.updatedAt });

/** A scoped key with one tag means that tag; otherwise the tag named, if any. */
const tagOf = (backend: MemoryBackend, tag: string | undefined) => tag ?? (backend.caller.containerTags?.length === 1 ? backend.caller.containerTags[0] : undefined);

/**
 * What memstream knows of a container tag: the memory layer's profile (static facts, recent
 * memories) when there is one and a tag is known, and the tag's documents: how many, the latest.
 */
async function profileOf(backend: MemoryBackend, tagAsked: string | undefined): Promise<Profile> {
  const tag = tagOf(backend, tagAsked);
  const [list, learned] = await Promise.all([
    backend.listDocuments({ ...(tag ? { containerTags: [tag] } : {}), limit: 10, sort: 'updatedAt', order: 'desc', includeContent: true }),
    backend.memoryLayer && tag ? backend.memoryLayer.profile({ containerTag: tag }) : null,
  ]);
  return {
    containerTag: tag ?? null,
    static: learned?.profile.static ?? [],
    dynamic: learned?.profile.dynamic ?? [],
    documentCount: list.pagination.totalItems,
    recentDocuments: list.memories.map((d) => ({ id: d.id, title: d.title, summary: summaryOf(d), updatedAt: d.updatedAt })),
  };
}

function profileText(p: Profile): string {
  return [
    `Profile${p.containerTag ? ` of ${p.containerTag}` : ''}:`,
    ...(p.static.length ? ['Facts:', ...p.static.map((m) => `- ${m}`)] : []),
    ...(p.dynamic.length ? ['Recent:', ...p.dynamic.map((m) => `- ${m}`)] : []),
    `${p.documentCount} document${p.documentCount === 1 ? '' : 's'}${p.recentDocuments.length ? ', the latest:' : '.'}`,
    ...p.recentDocuments.map((r) => `- ${r.summary ?? r.title ?? r.id} (${r.updatedAt})`),
  ].join('\n');
}

/**
 * One MCP server for one caller. The tools are Supermemory's MCP tools (search_memory,
 * add_memory, listMemories, whoAmI) plus list_documents and fetch_document, and the resource
 * memstream://profile/{containerTag}. Each answer carries structured content and plain text.
 */
export function createMcpServer(backend: MemoryBackend): McpServer {
  const server = new McpServer(SERVER_INFO, {
    instructions:
      'memstream is a memory service. Use search_memory before answering questions about the user or their past work, and add_memory to save facts worth remembering (action "forget" removes one). Container tags separate users and projects.',
  });

  server.registerTool(
    'search_memory',
    {
      title: 'Search memory',
      description: 'Search saved memories and documents by meaning and keywords. Returns the best matching passages with a similarity in 0..1.',
      inputSchema: {
        query: z.string().min(1).max(2000).describe('what to look for'),
        containerTag: Tag.optional(),
        includeProfile: z.boolean().optional().describe('also return the profile of the container tag'),
        limit: z.number().int().min(1).max(50).optional().describe('at most this many results (default 10)'),
      },
      outputSchema: { results: z.array(MemoryHit), total: z.number(), timingMs: z.number(), profile: Profile.optional() },
      annotations: { readOnlyHint: true },
    },
    async ({ query, containerTag, includeProfile, limit }) => {
      try {
        // hybrid: learned memories and document passages together (passages only without the memory layer).
        const r = await backend.searchMemories({ q: query, ...(containerTag ? { containerTag } : {}), limit: limit ?? 10, searchMode: 'hybrid' });
        const results = r.results.map((h) => ({
          id: h.id,
          kind: h.id.startsWith('mem_') ? ('memory' as const) : ('passage' as const),
          memory: h.memory ?? h.chunk ?? '',
          similarity: h.similarity,
          documentId: h.id.startsWith('mem_') ? (h.documents?.[0]?.id ?? null) : h.id.split(':')[0]!,
          title: h.documents?.[0]?.title ?? null,
          updatedAt: h.updatedAt,
        }));
        const profile = includeProfile ? await profileOf(backend, containerTag) : undefined;
        const text = [
          results.length ? results.map((h, i) => `${i + 1}. [${h.similarity.toFixed(2)}] ${h.memory}`).join('\n') : `No memories match ${JSON.stringify(query)}.`,
          ...(profile ? ['', profileText(profile)] : []),
        ].join('\n');
        return result({ results, total: r.total, timingMs: r.timing, ...(profile ? { profile } : {}) }, text);
      } catch (err) {
        return toolError(err);
      }
    },
  );

  server.registerTool(
    'add_memory',
    {
      title: 'Save or forget a memory',
      description:
        'Save a fact, preference or note to memory (action "save", the default), or forget one (action "forget": the memory with this exact text, else a memory with nearly the same words).',
      inputSchema: {
        content: z.string().min(1).max(100_000).describe('the memory to save, or the memory to forget'),
        action: z.enum(['save', 'forget']).optional().describe('save (default) or forget'),
        containerTag: Tag.optional(),
      },
      outputSchema: {
        action: z.enum(['save', 'forget']),
        id: z.string().nullable().describe('the memory saved or forgotten; null when nothing was close enough to forget'),
        status: z.string().optional(),
        forgotten: z.string().optional().describe('the text that was forgotten'),
      },
    },
    async ({ content, action, containerTag }) => {
      try {
        const customId = memoryCustomId(content, containerTag);
        if ((action ?? 'save') === 'save') {
          const out = await backend.addDocument({ content, customId, ...(containerTag ? { containerTag } : {}), metadata: { source: 'mcp' } });
          return result({ action: 'save', id: out.id, status: out.status }, `Saved (${out.status}): ${out.id}`);
        }
        // Forget: the memory saved with exactly this text, else the closest one if it is very close.
        let target: { id: string; text: string } | null = null;
        try {
          const d = await backend.getDocument(customId);
          target = { id: d.id, text: d.content ?? content };
        } catch (err) {
          if ((err as { httpStatus?: number }).httpStatus !== 404) throw err;
        }
        if (!target) {
          // Passages of documents (what add_memory saves), not learned statements.
          const r = await backend.searchMemories({ q: content, ...(containerTag ? { containerTag } : {}), limit: 5, searchMode: 'documents' });
          const scored = r.results.map((h) => ({ h, overlap: wordOverlap(content, h.chunk ?? h.memory ?? '') })).sort((a, b) => b.overlap - a.overlap);
          const best = scored[0];
          if (best && best.overlap >= FORGET_MIN_OVERLAP) target = { id: best.h.documents?.[0]?.id ?? best.h.id.split(':')[0]!, text: best.h.chunk ?? best.h.memory ?? '' };
          else {
            const near = best ? ` The closest (${Math.round(best.overlap * 100)}% of the words in common) was: ${JSON.stringify(best.h.chunk ?? best.h.memory)}.` : '';
            return result({ action: 'forget', id: null }, `Nothing close enough to forget.${near}`);
          }
        }
        const id = await backend.deleteDocument(target.id);
        return result({ action: 'forget', id, forgotten: target.text }, `Forgotten: ${target.text}`);
      } catch (err) {
        return toolError(err);
      }
    },
  );

  server.registerTool(
    'listMemories',
    {
      title: 'List memories',
      description: 'The most recently changed memories of a container tag (or every tag the key may see), newest first: what the memory layer learned from saved content (or, without one, the saved documents themselves).',
      inputSchema: {
        containerTag: Tag.optional(),
        limit: z.number().int().min(1).max(100).optional().describe('default 20'),
        page: z.number().int().min(1).optional(),
      },
      outputSchema: {
        source: z.enum(['memory-layer', 'documents']),
        memories: z.array(z.object({ id: z.string(), memory: z.string(), isStatic: z.boolean().nullable(), status: z.string().nullable(), containerTags: z.array(z.string()), updatedAt: z.string() })),
        total: z.number(),
        page: z.number(),
        totalPages: z.number(),
      },
      annotations: { readOnlyHint: true },
    },
    async ({ containerTag, limit, page }) => {
      try {
        const paging = { ...(containerTag ? { containerTags: [containerTag] } : {}), limit: limit ?? 20, page: page ?? 1, sort: 'updatedAt', order: 'desc' };
        let out;
        if (backend.memoryLayer) {
          const r = await backend.memoryLayer.listMemories(paging);
          // The list holds every version; an agent wants what is true now.
          const memories = r.memoryEntries.filter((m) => m.isLatest && !m.isForgotten).map((m) => ({ id: m.id, memory: m.memory, isStatic: m.isStatic, status: null, containerTags: m.containerTags, updatedAt: m.updatedAt }));
          out = { source: 'memory-layer' as const, memories, total: r.pagination.totalItems, page: r.pagination.currentPage, totalPages: r.pagination.totalPages };
        } else {
          const r = await backend.listDocuments({ ...paging, includeContent: true });
          const memories = r.memories.map((d) => ({ id: d.id, memory: summaryOf(d) ?? d.title ?? '', isStatic: null, status: d.status, containerTags: d.containerTags, updatedAt: d.updatedAt }));
          out = { source: 'documents' as const, memories, total: r.pagination.totalItems, page: r.pagination.currentPage, totalPages: r.pagination.totalPages };
        }
        const text = out.memories.length ? out.memories.map((m) => `- ${m.memory}${m.status ? ` [${m.status}]` : ''} (${m.id})`).join('\n') : 'No memories.';
        return result(out, text);
      } catch (err) {
        return toolError(err);
      }
    },
  );

  server.registerTool(
    'whoAmI',
    {
      title: 'Who am I',
      description: 'Which API key this connection uses and the container tags it may read and write.',
      inputSchema: {},
      outputSchema: { kind: z.enum(['admin', 'scoped']), keyId: z.string().nullable(), containerTags: z.array(z.string()).nullable(), server: z.string() },
      annotations: { readOnlyHint: true },
    },
    async () => {
      const c = backend.caller;
      const tags = c.containerTags;
      const text = c.kind === 'admin' ? 'The admin API key: every container tag.' : `A scoped API key (${c.keyId}) for container tags: ${tags!.join(', ')}.`;
      return result({ kind: c.kind, keyId: c.keyId ?? null, containerTags: tags, server: `${SERVER_INFO.name} ${SERVER_INFO.version}` }, text);
    },
  );

  server.registerTool(
    'list_documents',
    {
      title: 'List documents',
      description: 'Documents (files, pages, notes) with their processing status, newest first; filter by container tag and status.',
      inputSchema: {
        containerTag: Tag.optional(),
        status: DocumentStatus.optional(),
        limit: z.number().int().min(1).max(200).optional().describe('default 50'),
        page: z.number().int().min(1).optional(),
      },
      outputSchema: { documents: z.array(DocSummary), total: z.number(), page: z.number(), totalPages: z.number() },
      annotations: { readOnlyHint: true },
    },
    async ({ containerTag, status, limit, page }) => {
      try {
        const r = await backend.listDocuments({
          ...(containerTag ? { containerTags: [containerTag] } : {}),
          ...(status ? { statuses: [status] } : {}),
          limit: limit ?? 50,
          page: page ?? 1,
          sort: 'createdAt',
          order: 'desc',
        });
        const documents = r.memories.map(summarise);
        const text = documents.length ? documents.map((d) => `- ${d.title ?? '(untitled)'} [${d.status}] ${d.id}`).join('\n') : 'No documents.';
        return result({ documents, total: r.pagination.totalItems, page: r.pagination.currentPage, totalPages: r.pagination.totalPages }, text);
      } catch (err) {
        return toolError(err);
      }
    },
  );

  server.registerTool(
    'fetch_document',
    {
      title: 'Fetch a document',
      description: `One document by id or customId, with its text (cut at ${MAX_FETCH_CHARS} characters), status and metadata.`,
      inputSchema: { id: z.string().min(1).max(200).describe('document id or customId') },
      outputSchema: {
        id: z.string(),
        customId: z.string().nullable(),
        title: z.string().nullable(),
        status: z.string(),
        type: z.string(),
        containerTags: z.array(z.string()),
        metadata: z.record(z.string(), z.unknown()).nullable(),
        content: z.string().nullable(),
        truncated: z.boolean(),
        reason: z.string().nullable(),
        url: z.string().nullable(),
        updatedAt: z.string(),
      },
      annotations: { readOnlyHint: true },
    },
    async ({ id }) => {
      try {
        const d: DocumentResponse = await backend.getDocument(id);
        const truncated = (d.content?.length ?? 0) > MAX_FETCH_CHARS;
        const content = d.content === null ? null : d.content.slice(0, MAX_FETCH_CHARS);
        const out = { id: d.id, customId: d.customId, title: d.title, status: d.status, type: d.type, containerTags: d.containerTags, metadata: d.metadata, content, truncated, reason: d.reason, url: d.url, updatedAt: d.updatedAt };
        const text = `${d.title ?? '(untitled)'} [${d.status}${d.reason ? `: ${d.reason}` : ''}]\n\n${content ?? ''}${truncated ? '\n…(cut)' : ''}`;
        return result(out, text);
      } catch (err) {
        return toolError(err);
      }
    },
  );

  server.registerResource(
    'profile',
    new ResourceTemplate('memstream://profile/{containerTag}', {
      // A scoped key's tags are known; the admin key's are every tag, which are not listed.
      list: async () => ({
        resources: (backend.caller.containerTags ?? []).map((t) => ({ uri: `memstream://profile/${encodeURIComponent(t)}`, name: `profile of ${t}`, mimeType: 'application/json' })),
      }),
    }),
    { title: 'Profile of a container tag', description: 'How many memories a container tag holds and the ten latest, as JSON.', mimeType: 'application/json' },
    async (uri, vars) => {
      const tag = decodeURIComponent(String(vars.containerTag));
      const p = await profileOf(backend, tag);
      return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(p, null, 2) }] };
    },
  );

  return server;
}
