import { Router } from 'express';
import type { Logger } from '@memstream/kit';
import { deleteContainerTag, getContainerTag, updateContainerTag } from '../handlers/container-tags.js';
import type { GatewayPorts } from '../handlers/documents.js';
import { scopeOf } from './auth.js';

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
    const out = await deleteContainerTag(ports, req.params.tag, scopeOf(res));
    log.info({ containerTag: out.containerTag, deletedCount: out.deletedCount, kept: out.errors?.length ?? 0 }, 'container tag deleted');
    res.json(out);
  });
  return r;
}
