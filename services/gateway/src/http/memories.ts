import { Router } from 'express';
import { ConversationRequest } from '@memstream/contracts';
import { documentIdForCustomId, parseMessageArray, type Logger } from '@memstream/kit';
import { addDocument, type GatewayPorts } from '../handlers/documents.js';
import { createMemories, forgetMatching, forgetMemory, listMemories, profile, updateMemory, type MemoryPorts } from '../handlers/memories.js';
import { scopeOf } from './auth.js';
import { customIdNamespace } from '../handlers/scope.js';
import { requestLog } from './request-log.js';

export interface MemoryRouteOptions {
  memories: MemoryPorts;
  /** For /v4/conversations, which adds a document. */
  documents: GatewayPorts;
  log: Logger;
}

/**
 * POST /v4/conversations: one document per conversation (customId = conversationId), its
 * messages as a JSON message array. A later call may send only the new messages or the whole
 * conversation again: the messages the document already holds are recognised and only the
 * rest is appended (the add path appends messages to a conversation with a customId).
 */
async function addConversation(opts: MemoryRouteOptions, body: unknown, headers: Record<string, string>, res: import('express').Response) {
  const req = ConversationRequest.parse(body);
  const messages = req.messages.map((m) => ({ role: m.role, content: m.content, ...(m.name ? { name: m.name } : {}) }));
  // The conversation's document in the caller's own customId namespace, where the add below writes it.
  const existing = await opts.documents.views.get(documentIdForCustomId(req.conversationId, customIdNamespace(scopeOf(res))));
  const held = existing?.content ? (parseMessageArray(existing.content) ?? []) : [];
  const alreadyHeld = held.length > 0 && held.length <= messages.length && held.every((h, i) => h.role === messages[i]!.role && h.content === messages[i]!.content);
  const added = alreadyHeld ? messages.slice(held.length) : messages;
  const tags = [...(req.containerTags ?? []), ...(req.containerTag ? [req.containerTag] : [])];
  const out = await addDocument(
    opts.documents,
    {
      // Nothing new: the whole conversation again, which the add path recognises as unchanged.
      content: JSON.stringify(added.length ? added : messages),
      customId: req.conversationId,
      ...(tags.length ? { containerTags: tags } : {}),
      ...(req.metadata ? { metadata: req.metadata } : {}),
      ...(req.entityContext !== undefined ? { entityContext: req.entityContext } : {}),
    },
    headers,
    scopeOf(res),
  );
  return { id: out.id, conversationId: req.conversationId, status: out.status };
}

/** The memory layer's routes (memory-layer.md §3). Mounted after auth and the JSON parser. */
export function memoryRoutes(opts: MemoryRouteOptions): Router {
  const { memories: ports, log } = opts;
  const r = Router();
  r.post('/v4/profile', async (req, res) => {
    res.json(await profile(ports, req.body, scopeOf(res)));
  });
  r.post('/v4/memories/list', async (req, res) => {
    res.json(await listMemories(ports, req.body, scopeOf(res)));
  });
  r.post('/v4/memories/forget-matching', async (req, res) => {
    const out = await forgetMatching(ports, req.body, scopeOf(res));
    if (!out.dryRun && out.count) requestLog(log, res).info({ forgetBatchId: out.forgetBatchId, count: out.count }, 'memories forgotten by match');
    res.json(out);
  });
  r.post('/v4/memories', async (req, res) => {
    res.json(await createMemories(ports, req.body, scopeOf(res)));
  });
  r.patch('/v4/memories', async (req, res) => {
    res.json(await updateMemory(ports, req.body, scopeOf(res)));
  });
  r.delete('/v4/memories', async (req, res) => {
    res.json(await forgetMemory(ports, req.body, scopeOf(res)));
  });
  r.post('/v4/conversations', async (req, res) => {
    res.json(await addConversation(opts, req.body, { traceparent: res.locals.traceparent as string }, res));
  });
  return r;
}
