import { Router } from 'express';
import { z } from 'zod';
import { CreateWebhookRequest, CreateWebhookResponse, OutboundEvent, ListDeliveriesResponse, ListWebhooksResponse, WebhookResponse } from '@memstream/contracts';
import type { Logger } from '@memstream/kit';
import { createWebhook, deleteWebhook, getWebhook, listDeliveries, listWebhooks, type WebhookPorts } from '../handlers/webhooks.js';
import { principalOf } from './auth.js';
import { EventStreams, eventsHandler, type LifecycleSource } from './events.js';
import { requestLog } from './request-log.js';

export interface WebhookRouteOptions {
  ports: WebhookPorts;
  events: LifecycleSource;
  /** Open SSE responses; main ends them at shutdown. */
  streams: EventStreams;
  log: Logger;
  heartbeatMs?: number;
  /** See EventsOptions.keyValid: revoked and expired keys' streams are closed. */
  keyValid?: (keyId: string) => Promise<boolean>;
}

/** /v3/webhooks (registrations and their deliveries) and /v3/events (SSE). Mounted after auth and the JSON parser. */
export function webhookRoutes(opts: WebhookRouteOptions): Router {
  const { ports, log } = opts;
  const r = Router();
  r.post('/v3/webhooks', async (req, res) => {
    const hook = await createWebhook(ports, principalOf(res), req.body);
    requestLog(log, res).info({ webhookId: hook.id, url: hook.url, containerTags: hook.containerTags, events: hook.events }, 'webhook registered');
    res.status(201).json(hook);
  });
  r.get('/v3/webhooks', async (_req, res) => {
    res.json(await listWebhooks(ports, principalOf(res)));
  });
  r.get('/v3/webhooks/:id', async (req, res) => {
    res.json(await getWebhook(ports, principalOf(res), req.params.id));
  });
  r.get('/v3/webhooks/:id/deliveries', async (req, res) => {
    res.json(await listDeliveries(ports, principalOf(res), req.params.id, req.query as Record<string, unknown>));
  });
  r.delete('/v3/webhooks/:id', async (req, res) => {
    await deleteWebhook(ports, principalOf(res), req.params.id);
    requestLog(log, res).info({ webhookId: req.params.id }, 'webhook deleted');
    res.status(204).end();
  });
  r.get(
    '/v3/events',
    eventsHandler({
      source: opts.events,
      streams: opts.streams,
      log,
      ...(opts.heartbeatMs ? { heartbeatMs: opts.heartbeatMs } : {}),
      ...(opts.keyValid ? { keyValid: opts.keyValid } : {}),
    }),
  );
  return r;
}

/** The OpenAPI paths of these routes, from the zod contracts (merged into GET /openapi.json). */
export function webhookOpenApiPaths(): Record<string, object> {
  const schema = (s: z.ZodType, io: 'input' | 'output') => z.toJSONSchema(s, { io, unrepresentable: 'any', target: 'openapi-3.0' });
  const json = (s: object) => ({ content: { 'application/json': { schema: s } } });
  const error = (description: string) => ({ description, ...json({ $ref: '#/components/schemas/Error' }) });
  const errors = { '400': error('Invalid request: the details name the field'), '401': error('Missing or invalid API key'), '403': error("Outside a scoped key's container tags") };
  const id = [{ name: 'id', in: 'path', required: true, description: 'Webhook id (wh_…)', schema: { type: 'string' } }];
  return {
    '/v3/webhooks': {
      post: {
        summary: 'Register a webhook for document transitions and memory events (docs/webhooks.md); the signing secret is in this answer only',
        requestBody: { required: true, ...json(schema(CreateWebhookRequest, 'input')) },
        responses: { '201': { description: 'Registered', ...json(schema(CreateWebhookResponse, 'output')) }, ...errors },
      },
      get: { summary: 'List webhooks, without secrets', responses: { '200': { description: 'Webhooks', ...json(schema(ListWebhooksResponse, 'output')) }, ...errors } },
    },
    '/v3/webhooks/{id}': {
      get: { summary: 'One webhook, without its secret', parameters: id, responses: { '200': { description: 'The webhook', ...json(schema(WebhookResponse, 'output')) }, ...errors, '404': error('No such webhook') } },
      delete: { summary: 'Delete a webhook and what is queued for it', parameters: id, responses: { '204': { description: 'Deleted' }, ...errors, '404': error('No such webhook') } },
    },
    '/v3/webhooks/{id}/deliveries': {
      get: {
        summary: 'The latest state of its deliveries (retrying, delivered, failed), newest attempt first',
        parameters: [
          ...id,
          { name: 'status', in: 'query', required: false, schema: { type: 'string', enum: ['retrying', 'delivered', 'failed'] } },
          { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
          { name: 'since', in: 'query', required: false, description: 'Attempted since (ISO 8601); default 24 hours ago', schema: { type: 'string', format: 'date-time' } },
        ],
        responses: { '200': { description: 'Deliveries', ...json(schema(ListDeliveriesResponse, 'output')) }, ...errors, '404': error('No such webhook') },
      },
    },
    '/v3/events': {
      get: {
        summary: 'Server-Sent Events of document transitions and memory events (the webhook payloads; id: the LIFECYCLE sequence, for Last-Event-ID)',
        parameters: [
          { name: 'containerTag', in: 'query', required: false, schema: { type: 'string' } },
          { name: 'containerTags', in: 'query', required: false, description: 'Comma-separated; any one matches', schema: { type: 'string' } },
          { name: 'events', in: 'query', required: false, description: 'Comma-separated transitions and memory events (memory.created, memory.updated, memory.forgotten); default every document transition, memory events only when named', schema: { type: 'string' } },
          { name: 'Last-Event-ID', in: 'header', required: false, description: 'Resume after this id', schema: { type: 'string' } },
        ],
        responses: { '200': { description: 'text/event-stream', content: { 'text/event-stream': { schema: schema(OutboundEvent, 'output') } } }, ...errors },
      },
    },
  };
}
