import { Router } from 'express';
import { z } from 'zod';
import { ContainerTagResponse, DeleteContainerTagResponse, UpdateContainerTagRequest } from '@memstream/contracts';
import type { Logger } from '@memstream/kit';
import { deleteContainerTag, getContainerTag, updateContainerTag } from '../handlers/container-tags.js';
import type { GatewayPorts } from '../handlers/documents.js';
import { scopeOf } from './auth.js';
import { requestLog } from './request-log.js';

/** /v3/container-tags/{tag}: a tag's settings and counts, and deleting a whole tag. Mounted after auth and the JSON parser. */
export function containerTagRoutes(ports: GatewayPorts, log: Logger): Router {
  const r = Router();
  r.get('/v3/container-tags/:tag', async (req, res) => {
    res.json(await getContainerTag(ports, req.params.tag, scopeOf(res)));
  });
  r.patch('/v3/container-tags/:tag', async (req, res) => {
    res.json(await updateContainerTag(ports, req.params.tag, req.body, scopeOf(res)));
  });
  r.delete('/v3/container-tags/:tag', async (req, res) => {
    const out = await deleteContainerTag(ports, req.params.tag, scopeOf(res), { traceparent: res.locals.traceparent as string });
    requestLog(log, res).info({ containerTag: out.containerTag, deletedCount: out.deletedCount, kept: out.errors?.length ?? 0 }, 'container tag deleted');
    res.json(out);
  });
  return r;
}

/** The OpenAPI paths of these routes, generated from their contracts. */
export function containerTagOpenApiPaths(): Record<string, object> {
  const schema = (s: z.ZodType, io: 'input' | 'output') => z.toJSONSchema(s, { io, unrepresentable: 'any', target: 'openapi-3.0' });
  const json = (s: object) => ({ content: { 'application/json': { schema: s } } });
  const error = (description: string) => ({ description, ...json({ $ref: '#/components/schemas/Error' }) });
  const errors = { '400': error('Invalid request: the details name the field'), '401': error('Missing or invalid API key'), '403': error("Outside a scoped key's container tags") };
  const tag = [{ name: 'tag', in: 'path', required: true, description: 'Container tag', schema: { type: 'string' } }];
  const settings = { '200': { description: "The tag's settings and document counts", ...json(schema(ContainerTagResponse, 'output')) }, ...errors };
  return {
    '/v3/container-tags/{tag}': {
      get: { summary: "A container tag's settings (entityContext) and its documents counted by status", parameters: tag, responses: settings },
      patch: { summary: "Change a container tag's settings; entityContext null removes it", parameters: tag, requestBody: { required: true, ...json(schema(UpdateContainerTagRequest, 'input')) }, responses: settings },
      delete: {
        summary: 'Delete a container tag: its settings and every document carrying it (log history, chunks and blobs included)',
        parameters: tag,
        responses: { '200': { description: 'Deleted; errors lists documents a scoped key had to keep', ...json(schema(DeleteContainerTagResponse, 'output')) }, ...errors },
      },
    },
  };
}
