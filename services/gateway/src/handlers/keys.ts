import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import {
  CreateScopedKeyRequest,
  SCOPED_KEY_ENDPOINTS,
  type CreateScopedKeyResponse,
  type ListScopedKeysResponse,
  type RevokeScopedKeyResponse,
  type ScopedKeyInfo,
} from '@memstream/contracts';
import { AuthError, NotFoundError } from '@memstream/kit';

/** A scoped key as stored: its HMAC, never the key itself. */
export interface KeyRecord {
  id: string;
  name: string;
  containerTags: string[];
  /** HMAC-SHA256 of the whole key string under the server's key secret, hex. */
  hash: string;
  createdAt: string;
  expiresAt: string | null;
  rateLimitMax: number;
  rateLimitTimeWindow: number;
  revokedAt: string | null;
}

/** Where scoped keys live: shared by every gateway replica. */
export interface KeyStore {
  /** The key's record, or null. Served from the replica's copy where it has one. */
  find(id: string): Promise<KeyRecord | null>;
  /** Store a new key. */
  create(record: KeyRecord): Promise<void>;
  /** Every key, revoked ones included, oldest first. */
  list(): Promise<KeyRecord[]>;
  /** Mark the key revoked (a revoked key stays listed); null when there is no such key. */
  revoke(id: string, at: string): Promise<KeyRecord | null>;
}

export interface KeyPorts {
  store: KeyStore;
  /** The HMAC key for key hashes (see deriveKeySecret). */
  secret: Buffer;
  now(): Date;
  /** Limits of a key created without its own. */
  defaults: { rateLimitMax: number; rateLimitTimeWindow: number };
}

/** Scoped keys look like msk_<20 hex: id>_<43 base64url: secret>, so the id can be read without a lookup. */
export const KEY_PREFIX = 'msk_';
const KEY_PATTERN = /^msk_([0-9a-f]{20})_([A-Za-z0-9_-]{43})$/;

/** The id inside a well-formed scoped key, or null when the string is not one. */
export function parseKeyId(token: string): string | null {
  return KEY_PATTERN.exec(token)?.[1] ?? null;
}

/**
 * The HMAC key for scoped-key hashes: MEMSTREAM_KEY_SECRET when set, else derived (HKDF-SHA256)
 * from the admin key. Derived, rotating the admin key invalidates every scoped key; a dedicated
 * secret decouples them.
 */
export function deriveKeySecret(adminKey: string, dedicated?: string): Buffer {
  return Buffer.from(hkdfSync('sha256', dedicated ?? adminKey, 'memstream-scoped-keys', dedicated ? 'dedicated-v1' : 'admin-derived-v1', 32));
}

export function hashKey(secret: Buffer, token: string): string {
  return createHmac('sha256', secret).update(token).digest('hex');
}

export function isExpired(record: KeyRecord, now: Date): boolean {
  return record.expiresAt !== null && Date.parse(record.expiresAt) <= now.getTime();
}

/** A key's public description: everything but the secret and its hash. */
export function keyInfo(r: KeyRecord, now: Date): ScopedKeyInfo {
  return {
    id: r.id,
    name: r.name,
    containerTag: r.containerTags[0]!,
    containerTags: r.containerTags,
    createdAt: r.createdAt,
    expiresAt: r.expiresAt,
    rateLimitMax: r.rateLimitMax,
    rateLimitTimeWindow: r.rateLimitTimeWindow,
    allowedEndpoints: [...SCOPED_KEY_ENDPOINTS],
    revoked: r.revokedAt !== null,
    revokedAt: r.revokedAt,
    expired: isExpired(r, now),
  };
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** POST /v3/auth/scoped-key: the key is in this answer and nowhere else. */
export async function createScopedKey(ports: KeyPorts, body: unknown): Promise<CreateScopedKeyResponse> {
  const req = CreateScopedKeyRequest.parse(body);
  const containerTags = [...new Set([...(req.containerTag !== undefined ? [req.containerTag] : []), ...(req.containerTags ?? [])])];
  const id = randomBytes(10).toString('hex');
  const key = `${KEY_PREFIX}${id}_${randomBytes(32).toString('base64url')}`;
  const now = ports.now();
  const record: KeyRecord = {
    id,
    name: req.name ?? `scoped_${containerTags[0]}`,
    containerTags,
    hash: hashKey(ports.secret, key),
    createdAt: now.toISOString(),
    expiresAt: req.expiresInDays !== undefined ? new Date(now.getTime() + req.expiresInDays * DAY_MS).toISOString() : null,
    rateLimitMax: req.rateLimitMax ?? ports.defaults.rateLimitMax,
    rateLimitTimeWindow: req.rateLimitTimeWindow ?? ports.defaults.rateLimitTimeWindow,
    revokedAt: null,
  };
  await ports.store.create(record);
  return { ...keyInfo(record, now), key };
}

/** GET /v3/auth/scoped-key */
export async function listScopedKeys(ports: KeyPorts): Promise<ListScopedKeysResponse> {
  const now = ports.now();
  return { keys: (await ports.store.list()).map((r) => keyInfo(r, now)) };
}

/** DELETE /v3/auth/scoped-key/{id}: idempotent; a revoked key keeps its first revocation time. */
export async function revokeScopedKey(ports: KeyPorts, id: string): Promise<RevokeScopedKeyResponse> {
  const r = /^[0-9a-f]{20}$/.test(id) ? await ports.store.revoke(id, ports.now().toISOString()) : null;
  if (!r) throw new NotFoundError('API key not found', `no scoped API key with id ${JSON.stringify(id)}`);
  return { success: true, id: r.id, revokedAt: r.revokedAt! };
}

/**
 * The record of a scoped key presented as a bearer token, or a 401 saying why not. The HMAC is
 * compared (in constant time) before anything about the key is revealed: only the holder of the
 * right secret learns that the key was revoked or has expired.
 */
export async function verifyScopedKey(ports: Pick<KeyPorts, 'store' | 'secret' | 'now'>, token: string): Promise<KeyRecord> {
  const id = parseKeyId(token);
  if (id === null) throw new AuthError('Unauthorized', 'invalid API key');
  const record = await ports.store.find(id);
  const got = Buffer.from(hashKey(ports.secret, token), 'hex');
  // Compared even when there is no record, so an unknown id costs the same as a wrong secret.
  const want = record ? Buffer.from(record.hash, 'hex') : Buffer.alloc(got.length);
  const match = want.length === got.length && timingSafeEqual(want, got);
  if (!record || !match) throw new AuthError('Unauthorized', 'invalid API key');
  if (record.revokedAt !== null) throw new AuthError('API key revoked', `this API key was revoked at ${record.revokedAt}`);
  if (isExpired(record, ports.now())) throw new AuthError('API key expired', `this API key expired at ${record.expiresAt}; ask for a new one`);
  return record;
}

/** Keys that expire within `warnDays` (and have not yet), with the whole days left. */
export function expiringKeys(records: Iterable<KeyRecord>, now: Date, warnDays: number): Array<{ record: KeyRecord; daysLeft: number }> {
  const out: Array<{ record: KeyRecord; daysLeft: number }> = [];
  for (const r of records) {
    if (r.revokedAt !== null || r.expiresAt === null) continue;
    const left = Date.parse(r.expiresAt) - now.getTime();
    if (left > 0 && left <= warnDays * DAY_MS) out.push({ record: r, daysLeft: Math.floor(left / DAY_MS) });
  }
  return out;
}
