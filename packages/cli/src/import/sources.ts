import path from 'node:path';
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { ContainerTag, CustomId, Metadata } from '@memstream/contracts';

/** The upload limit of POST /v3/documents/file; a bigger file fails here, without a request. */
export const MAX_FILE_BYTES = 50 * 1024 * 1024;

/** One document to import: a file to upload, or content (text or a URL) to add. */
export type ImportItem = {
  /** What the user recognises in progress and failures: a path, `path:line`, or the URL. */
  label: string;
  /** Derived from where the item came from, so a second run finds it again. */
  customId: string;
  containerTag?: string;
  metadata?: Metadata;
  /** sha256 of what is sent; kept as metadata.importHash so a second run can skip unchanged items. */
  hash: string;
} & ({ kind: 'file'; file: string; size: number } | { kind: 'content'; content: string; filepath?: string } | { kind: 'invalid'; reason: string });

/** customId for a source: `imp_` + 24 base64url characters of its sha256 (stable, within customId's alphabet and length). */
export function customIdFor(source: string): string {
  return 'imp_' + createHash('sha256').update(source).digest('base64url').slice(0, 24);
}

const sha256 = (b: string | Buffer) => createHash('sha256').update(b).digest('hex');

const isUrl = (s: string) => /^https?:\/\/\S+$/i.test(s);

/** Every file under a folder, recursively, in a stable order; names starting with a dot are skipped (.git, editors' files). */
async function walk(dir: string): Promise<string[]> {
  const out: string[] = [];
  const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
  for (const e of entries) {
    if (e.name.startsWith('.')) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await walk(p)));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

/** A `.jsonl` line: `{content, customId?, containerTag?, metadata?}`. */
function jsonlItem(file: string, lineNo: number, line: string, label: string): ImportItem {
  const fallbackId = customIdFor(`${file}#${lineNo}`);
  let j: unknown;
  try {
    j = JSON.parse(line);
  } catch {
    return { kind: 'invalid', label, customId: fallbackId, hash: '', reason: 'not valid JSON' };
  }
  if (typeof j !== 'object' || j === null || Array.isArray(j)) return { kind: 'invalid', label, customId: fallbackId, hash: '', reason: 'expected a JSON object {content, customId?, containerTag?, metadata?}' };
  const o = j as Record<string, unknown>;
  if (typeof o.content !== 'string' || o.content.trim() === '') return { kind: 'invalid', label, customId: fallbackId, hash: '', reason: 'content: a non-empty string is required' };
  const customId = o.customId === undefined ? fallbackId : CustomId.safeParse(o.customId);
  if (typeof customId !== 'string' && !customId.success) return { kind: 'invalid', label, customId: fallbackId, hash: '', reason: `customId: ${customId.error.issues[0]?.message}` };
  const tag = o.containerTag === undefined ? undefined : ContainerTag.safeParse(o.containerTag);
  if (tag && !tag.success) return { kind: 'invalid', label, customId: fallbackId, hash: '', reason: `containerTag: ${tag.error.issues[0]?.message}` };
  const meta = o.metadata === undefined ? undefined : Metadata.safeParse(o.metadata);
  if (meta && !meta.success) return { kind: 'invalid', label, customId: fallbackId, hash: '', reason: `metadata: ${meta.error.issues[0]?.message} (flat: string, number, boolean or string[] values)` };
  return {
    kind: 'content',
    label,
    customId: typeof customId === 'string' ? customId : customId.data,
    content: o.content,
    ...(tag ? { containerTag: tag.data } : {}),
    ...(meta ? { metadata: meta.data } : {}),
    hash: sha256(JSON.stringify([o.content, tag?.data ?? null, meta?.data ?? null])),
  };
}

function urlItem(url: string, label: string): ImportItem {
  try {
    new URL(url);
  } catch {
    return { kind: 'invalid', label, customId: customIdFor(url), hash: '', reason: 'not a valid URL' };
  }
  if (!isUrl(url)) return { kind: 'invalid', label, customId: customIdFor(url), hash: '', reason: 'only http and https URLs can be imported' };
  return { kind: 'content', label, customId: customIdFor(url), content: url, hash: sha256(url) };
}

/**
 * The items behind the command line's arguments: an http(s) URL; a folder (every file in it,
 * recursively); a `.jsonl` file (one document per line); a `.urls` file (one URL per line, `#`
 * comments); any other file (uploaded as it is). Lists are expanded inside folders too.
 * A path that does not exist is an error before anything is sent.
 */
export async function collectItems(args: string[], cwd: string): Promise<ImportItem[]> {
  const items: ImportItem[] = [];
  for (const arg of args) {
    if (isUrl(arg)) {
      items.push(urlItem(arg, arg));
      continue;
    }
    const abs = path.resolve(cwd, arg);
    const st = await stat(abs).catch(() => null);
    if (!st) throw new Error(`${arg}: no such file or folder`);
    const files = st.isDirectory() ? await walk(abs) : [abs];
    for (const file of files) {
      const rel = path.relative(cwd, file);
      const label = rel && !rel.startsWith('..') ? rel : file;
      const ext = path.extname(file).toLowerCase();
      if (ext === '.jsonl' || ext === '.urls') {
        const lines = (await readFile(file, 'utf8')).split(/\r?\n/);
        lines.forEach((raw, i) => {
          const line = raw.trim();
          if (line === '' || (ext === '.urls' && line.startsWith('#'))) return;
          items.push(ext === '.jsonl' ? jsonlItem(file, i + 1, line, `${label}:${i + 1}`) : urlItem(line, `${label}:${i + 1} ${line}`));
        });
        continue;
      }
      const size = (await stat(file)).size;
      // The hash is taken when the file is sent (reading 500 files up front would double the reads).
      items.push({ kind: 'file', label, customId: customIdFor(file), file, size, hash: '' });
    }
  }
  return items;
}

/** The file's bytes and their sha256 (read once, when the item is sent). */
export async function readForUpload(item: Extract<ImportItem, { kind: 'file' }>): Promise<Buffer> {
  const bytes = await readFile(item.file);
  item.hash = sha256(bytes);
  return bytes;
}
