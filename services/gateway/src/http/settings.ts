import { Router } from 'express';
import { z } from 'zod';
import { SettingsPatch, SettingsResponse, UpdateSettingsResponse } from '@memstream/contracts';
import { getSettings, patchSettings, type SettingsStore } from '../handlers/settings.js';
import { scopeOf } from './auth.js';

/** /v3/settings (SDK client.settings). Mounted after auth and the JSON parser. */
export function settingsRoutes(store: SettingsStore): Router {
  const r = Router();
  r.get('/v3/settings', async (_req, res) => {
    res.json(await getSettings(store, scopeOf(res)));
  });
  r.patch('/v3/settings', async (req, res) => {
    res.json(await patchSettings(store, req.body, scopeOf(res)));
  });
  return r;
}

/** The OpenAPI paths of these routes, generated from their contracts. */
export function settingsOpenApiPaths(): Record<string, object> {
  const schema = (s: z.ZodType, io: 'input' | 'output') => z.toJSONSchema(s, { io, unrepresentable: 'any', target: 'openapi-3.0' });
  const json = (s: object) => ({ content: { 'application/json': { schema: s } } });
  const error = (description: string) => ({ description, ...json({ $ref: '#/components/schemas/Error' }) });
  const errors = { '400': error('Invalid request: the details name the field'), '401': error('Missing or invalid API key') };
  return {
    '/v3/settings': {
      get: {
        summary: "This API key's settings (a scoped key's are its container tags' own); connector secrets answered masked",
        responses: { '200': { description: 'The settings set', ...json(schema(SettingsResponse, 'output')) }, ...errors },
      },
      patch: {
        summary:
          'Change settings: chunkSize feeds the chunker and filterPrompt, shouldLLMFilter, includeItems and excludeItems feed memory extraction for documents added from now on; connector credentials are stored, never answered in full; null resets a field',
        requestBody: { required: true, ...json(schema(SettingsPatch, 'input')) },
        responses: { '200': { description: 'What changed (secrets masked)', ...json(schema(UpdateSettingsResponse, 'output')) }, ...errors },
      },
    },
  };
}
