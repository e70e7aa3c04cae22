import { SECRET_SETTINGS, SettingsPatch, documentSettingsOf, type DocumentSettings, type SettingsResponse, type StoredSettings, type UpdateSettingsResponse } from '@memstream/contracts';
import { customIdNamespace, type TagScope } from './scope.js';

/** The settings of each key scope (GET/PATCH /v3/settings), shared by every gateway replica. */
export interface SettingsStore {
  get(owner: string): Promise<StoredSettings>;
  /** Apply `change` to the owner's settings atomically (a concurrent PATCH is not lost); returns the result. */
  update(owner: string, change: (current: StoredSettings) => StoredSettings): Promise<StoredSettings>;
}

/**
 * Whose settings a caller reads and writes: the admin key's own, or a scoped key's container
 * tags' (the same namespace as its customIds), so one scope never sees or changes another's.
 */
export function settingsOwner(scope: TagScope): string {
  return customIdNamespace(scope);
}

/** A secret as answered: never in full, only its last 4 characters (all hidden when it is short). */
export function maskSecret(secret: string): string {
  return secret.length <= 8 ? '…' : `…${secret.slice(-4)}`;
}

function masked(s: StoredSettings): SettingsResponse {
  const out: SettingsResponse = { ...s };
  for (const k of SECRET_SETTINGS) if (s[k] !== undefined) out[k] = maskSecret(s[k]);
  return out;
}

/** GET /v3/settings: the caller's settings, secrets masked. */
export async function getSettings(store: SettingsStore, scope: TagScope): Promise<SettingsResponse> {
  return masked(await store.get(settingsOwner(scope)));
}

/** PATCH /v3/settings: set the fields named, reset those sent as null; answers what changed, masked. */
export async function patchSettings(store: SettingsStore, body: unknown, scope: TagScope): Promise<UpdateSettingsResponse> {
  const patch = SettingsPatch.parse(body);
  const owner = settingsOwner(scope);
  await store.update(owner, (current) => {
    const next: Record<string, unknown> = { ...current };
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete next[k];
      else next[k] = v;
    }
    return next as StoredSettings;
  });
  const updated: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(patch)) updated[k] = (SECRET_SETTINGS as readonly string[]).includes(k) && typeof v === 'string' ? maskSecret(v) : v;
  return { orgId: owner, orgSlug: owner, updated: updated as SettingsResponse };
}

/** What a document submitted by this scope carries of its settings (chunk size, extraction filters). */
export async function documentSettingsFor(store: SettingsStore | undefined, scope: TagScope): Promise<DocumentSettings | undefined> {
  return store ? documentSettingsOf(await store.get(settingsOwner(scope))) : undefined;
}
