import { z } from 'zod';

/** `includeItems` / `excludeItems`: one item or a list; extraction keeps / drops memories that mention one. */
const Items = z.union([z.string().min(1).max(200), z.array(z.string().min(1).max(200)).max(100)]);
const ConnectorId = z.string().min(1).max(500);
/** A connector's client secret: stored, never answered in full. */
const ConnectorSecret = z.string().min(1).max(2000);

/**
 * The settings of one API key's scope (`GET` / `PATCH /v3/settings`, SDK `client.settings`). A
 * PATCH names the fields it changes; `null` resets one to its default. Unknown fields are refused.
 */
export const SettingsPatch = z
  .object({
    /** The chunker's largest chunk, in tokens, for documents added with this key from now on. */
    chunkSize: z.number().int().min(32).max(8192).nullable(),
    /** Told to a model extractor: which content is worth remembering (ignored by the offline rules). */
    filterPrompt: z.string().min(1).max(4000).nullable(),
    /** With a model extractor: apply filterPrompt. */
    shouldLLMFilter: z.boolean().nullable(),
    includeItems: Items.nullable(),
    excludeItems: Items.nullable(),
    githubClientId: ConnectorId.nullable(),
    githubClientSecret: ConnectorSecret.nullable(),
    githubCustomKeyEnabled: z.boolean().nullable(),
    googleDriveClientId: ConnectorId.nullable(),
    googleDriveClientSecret: ConnectorSecret.nullable(),
    googleDriveCustomKeyEnabled: z.boolean().nullable(),
    notionClientId: ConnectorId.nullable(),
    notionClientSecret: ConnectorSecret.nullable(),
    notionCustomKeyEnabled: z.boolean().nullable(),
    onedriveClientId: ConnectorId.nullable(),
    onedriveClientSecret: ConnectorSecret.nullable(),
    onedriveCustomKeyEnabled: z.boolean().nullable(),
  })
  .partial()
  .strict();
export type SettingsPatch = z.infer<typeof SettingsPatch>;

/** The stored settings: the fields set, none null. */
export type StoredSettings = { [K in keyof SettingsPatch]?: Exclude<SettingsPatch[K], null> };

/** The fields that are secrets: answered masked ("…" and their last 4 characters). */
export const SECRET_SETTINGS = ['githubClientSecret', 'googleDriveClientSecret', 'notionClientSecret', 'onedriveClientSecret'] as const;

/** GET /v3/settings: the fields set, secrets masked. */
const Masked = z.string().nullable().optional();
export const SettingsResponse = SettingsPatch.extend({ githubClientSecret: Masked, googleDriveClientSecret: Masked, notionClientSecret: Masked, onedriveClientSecret: Masked });
export type SettingsResponse = z.infer<typeof SettingsResponse>;

/** PATCH /v3/settings: who the settings belong to, and the fields the call changed (secrets masked). */
export const UpdateSettingsResponse = z.object({ orgId: z.string(), orgSlug: z.string(), updated: SettingsResponse });
export type UpdateSettingsResponse = z.infer<typeof UpdateSettingsResponse>;

/**
 * What a document carries of its key's settings from the moment it was submitted (on
 * document.submitted.v1): the chunker and the memorizer read them from the log, so a replay
 * chunks and extracts as the first run did.
 */
export const DocumentSettings = z.object({
  chunkSize: z.number().int().min(32).max(8192).optional(),
  filterPrompt: z.string().optional(),
  shouldLLMFilter: z.boolean().optional(),
  includeItems: z.array(z.string()).optional(),
  excludeItems: z.array(z.string()).optional(),
});
export type DocumentSettings = z.infer<typeof DocumentSettings>;

/** The part of a scope's settings documents carry; undefined when none is set. */
export function documentSettingsOf(s: StoredSettings): DocumentSettings | undefined {
  const items = (v: string | string[] | undefined) => (v === undefined ? undefined : Array.isArray(v) ? v : [v]);
  const out: DocumentSettings = {};
  if (s.chunkSize !== undefined) out.chunkSize = s.chunkSize;
  if (s.filterPrompt !== undefined) out.filterPrompt = s.filterPrompt;
  if (s.shouldLLMFilter !== undefined) out.shouldLLMFilter = s.shouldLLMFilter;
  const inc = items(s.includeItems);
  const exc = items(s.excludeItems);
  if (inc) out.includeItems = inc;
  if (exc) out.excludeItems = exc;
  return Object.keys(out).length ? out : undefined;
}
