import { Router, type Response } from 'express';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ZodError } from 'zod';
import { ValidationError, errorMessage, type Logger } from '@memstream/kit';
import { createMcpServer, type MemoryBackend, type MemoryLayer } from '@memstream/mcp';
import { addDocument, deleteDocument, getDocument, listDocuments, toDocumentResponse, type GatewayPorts } from '../handlers/documents.js';
import { searchMemories, type SearchPorts } from '../handlers/search.js';
import { listMemories, profile, type MemoryPorts } from '../handlers/memories.js';
import { principalOf, scopeOf } from './auth.js';
import { describeZodError } from './errors.js';
import { requestLog } from './request-log.js';

export interface McpRouteOptions {
  ports: GatewayPorts;
  search: SearchPorts;
  /** The memory layer: search_memory then finds memories as well as passages. */
  memories?: MemoryPorts;
  log: Logger;
}

/** Bad input reaches the agent as the HTTP API words it (`Invalid request: field: why`). */
async function asApi<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ZodError) throw new ValidationError('Invalid request', describeZodError(err));
    throw err;
  }
}

/**
 * The MCP tools' memstream for the caller of this request: the HTTP handlers themselves, called
 * in process with the caller's tag scope, so MCP and HTTP validate and scope identically.
 */
function inProcessBackend(opts: McpRouteOptions, res: Response): MemoryBackend {
  const principal = principalOf(res);
  const scope = scopeOf(res);
  const trace = { traceparent: res.locals.traceparent as string };
  const log = requestLog(opts.log, res);
  return {
    caller: principal.kind === 'admin' ? { kind: 'admin', containerTags: null } : { kind: 'scoped', keyId: principal.keyId, containerTags: [...principal.containerTags] },
    searchMemories: (body) => asApi(() => searchMemories(opts.search, body, scope, opts.memories)),
    addDocument: (body) =>
      asApi(async () => {
        const out = await addDocument(opts.ports, body, trace, scope);
        log.info({ documentId: out.id, status: out.status, via: 'mcp' }, 'document accepted');
        return out;
      }),
    getDocument: (id) => asApi(async () => toDocumentResponse(await getDocument(opts.ports, id, scope))),
    deleteDocument: (id) =>
      asApi(async () => {
        const out = await deleteDocument(opts.ports, id, 'api', scope, trace);
        log.info({ documentId: out, via: 'mcp' }, 'document deleted');
        return out;
      }),
    listDocuments: (body) => asApi(() => listDocuments(opts.ports, body, scope)),
    ...(opts.memories ? { memoryLayer: memoryLayerOf(opts.memories, scope) } : {}),
  };
}

function memoryLayerOf(memories: MemoryPorts, scope: ReturnType<typeof scopeOf>): MemoryLayer {
  return {
    listMemories: (body) => asApi(() => listMemories(memories, body, scope)),
    profile: (body) => asApi(() => profile(memories, body, scope)),
  };
}

/**
 * POST /mcp: MCP over Streamable HTTP, stateless (a server and a transport per request, as the
 * SDK's stateless example does), behind the same bearer keys as every route. JSON answers, not
 * SSE: no tool streams progress. GET and DELETE (the optional stream and session end) are 405.
 */
export function mcpRoutes(opts: McpRouteOptions): Router {
  const r = Router();
  r.post('/mcp', async (req, res, next) => {
    try {
      const server = createMcpServer(inProcessBackend(opts, res));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } catch (err) {
      requestLog(opts.log, res).warn({ err: errorMessage(err) }, 'mcp request failed');
      next(err);
    }
  });
  r.all('/mcp', (_req, res) => {
    res.status(405).setHeader('allow', 'POST').json({ error: 'Method not allowed', details: 'this MCP endpoint is stateless: POST JSON-RPC messages to /mcp (no session, no server-sent stream)' });
  });
  return r;
}
