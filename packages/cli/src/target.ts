import path from 'node:path';
import { existsSync, readFileSync } from 'node:fs';
import type { Config } from './config.js';

/** Where the running memstream is and the key to use: flags, then the environment, then `up`'s data dir. */
export function apiTarget(config: Config, dataDir: string, flags: { url?: string | undefined; key?: string | undefined }): { baseUrl: string; apiKey: string } {
  const host = config.MEMSTREAM_HOST === '0.0.0.0' ? '127.0.0.1' : config.MEMSTREAM_HOST;
  const baseUrl = (flags.url ?? config.MEMSTREAM_URL ?? `http://${host}:${config.MEMSTREAM_PORT}`).replace(/\/+$/, '');
  const keyFile = path.join(dataDir, 'api-key');
  const apiKey = flags.key ?? config.MEMSTREAM_API_KEY ?? (existsSync(keyFile) ? readFileSync(keyFile, 'utf8').trim() : undefined);
  if (!apiKey) throw new Error(`no API key: pass --key, set MEMSTREAM_API_KEY, or run ./memstream up once (it keeps one in ${keyFile})`);
  return { baseUrl, apiKey };
}
