/**
 * A retrieval test set from real text that every machine of this kind has offline: the English
 * manual pages in /usr/share/man (sections 1, 2, 3, 5, 7 and 8: Debian packages' own
 * documentation, written by people). The Google Cloud CLI's ~16,000 generated `gcloud-*` pages
 * are left out: one templated source would outnumber every other one ten to one.
 *
 * - Documents: the pages, with troff markup stripped and the NAME section removed.
 * - Queries: each page's one-line NAME description ("ls \- list directory contents" gives the
 *   query "list directory contents"), whose one relevant document is the page it came from. A
 *   description shared by two pages is ambiguous and not used; one that names its own command
 *   is not used either (that would be a lookup by name, not a search).
 *
 * Everything is chosen with a seeded shuffle, so a run is repeatable on the same machine.
 */
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';

export const MAN_DIRS = ['man1', 'man2', 'man3', 'man5', 'man7', 'man8'].map((s) => `/usr/share/man/${s}`);

export interface ManDoc {
  /** The page's file name without .gz, e.g. `ls.1`. */
  id: string;
  /** The command(s) the NAME line names. */
  name: string;
  /** The NAME description, the query. */
  description: string;
  /** The page without its NAME section, as plain text. */
  text: string;
}

export interface RetrievalSet {
  docs: ManDoc[];
  /** Query → the id of its one relevant document. */
  queries: { q: string; relevant: string }[];
  /** Pages read, and why the others were not used. */
  stats: { files: number; usable: number; duplicates: number; tooShort: number };
}

/** mulberry32: a seeded PRNG. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function shuffle<T>(xs: T[], rnd: () => number): T[] {
  const a = xs.slice();
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

const ESCAPES: Array<[RegExp, string]> = [
  [/\\f(\(..|\[[^\]]*\]|.)/g, ''], // font changes
  [/\\s[+-]?\d+/g, ''], // size changes
  [/\\\*(\(..|\[[^\]]*\]|.)/g, ''], // string registers
  [/\\\((em|en)/g, '—'],
  [/\\\((aq|cq|oq)/g, "'"],
  [/\\\((lq|rq|dq)/g, '"'],
  [/\\\((bu|pc)/g, '·'],
  [/\\\(co/g, '©'],
  [/\\\(../g, ''],
  [/\\\[[^\]]*\]/g, ''],
  [/\\[-]/g, '-'],
  [/\\e/g, '\\'],
  [/\\[&,/|^%:)]/g, ''],
  [/\\ /g, ' '],
  [/\\"/g, ''],
];

function unescapeTroff(s: string): string {
  let out = s;
  for (const [re, to] of ESCAPES) out = out.replace(re, to);
  return out.replace(/\\(.)/g, '$1');
}

/** Macro arguments, with troff quoting. */
function macroArgs(rest: string): string {
  const args = rest.match(/"[^"]*"|\S+/g) ?? [];
  return args.map((a) => a.replace(/^"|"$/g, '')).join(' ');
}

/** troff (man and mdoc macros) → plain text, split by section: [heading, body][]. */
export function troffSections(src: string): Array<[string, string]> {
  const sections: Array<[string, string[]]> = [['', []]];
  for (const raw of src.split('\n')) {
    if (/^['.]\s*\\"/.test(raw) || raw.startsWith('.\\"') || raw.startsWith("'\\\"")) continue;
    const m = /^[.']\s*([A-Za-z][A-Za-z0-9]*)\s*(.*)$/.exec(raw);
    if (m) {
      const [, macro, rest] = m as unknown as [string, string, string];
      if (macro === 'SH' || macro === 'Sh') {
        sections.push([unescapeTroff(macroArgs(rest)).trim().toUpperCase(), []]);
        continue;
      }
      // Macros whose arguments are text (man: B, I, BR…; mdoc: Nm, Nd, Fl, Ar…); the rest are layout.
      if (/^(B|I|BI|BR|IB|IR|RB|RI|SS|SM|SB|TP|IP|Nm|Nd|Fl|Ar|Cm|Op|Pa|Xr|Dq|Sq|Em|Li|Ql|Va|Ev|Ss|It|Tn|Dv|Er|Ic|Sy|Ta)$/.test(macro)) {
        const text = unescapeTroff(macroArgs(rest));
        if (text) sections.at(-1)![1].push(macro === 'Nd' ? `- ${text}` : text);
      }
      continue;
    }
    const text = unescapeTroff(raw).trim();
    if (text) sections.at(-1)![1].push(text);
  }
  return sections.map(([h, lines]) => [h, lines.join('\n')]);
}

/** One page → a document, or why not. */
export function parseManPage(id: string, src: string): ManDoc | 'no-name' {
  const sections = troffSections(src);
  const nameSec = sections.find(([h]) => h === 'NAME' || h === 'NOM' || h === 'NAME:');
  if (!nameSec) return 'no-name';
  const line = nameSec[1].replace(/\s+/g, ' ').trim();
  // "cmd1, cmd2 - description"; some pages repeat the dash ("zstd - zstd, zstdmt - Compress…").
  const cut = line.lastIndexOf(' - ');
  if (cut < 0) return 'no-name';
  const name = line.slice(0, cut).trim();
  const description = line.slice(cut + 3).trim();
  const text = sections
    .filter(([h]) => h !== nameSec[0])
    .map(([h, body]) => (h ? `${h}\n${body}` : body))
    .join('\n\n')
    .trim();
  return { id, name, description, text };
}

function words(s: string): string[] {
  return s.toLowerCase().match(/[a-z0-9]+/g) ?? [];
}

/**
 * Read the pages and build the set: `docs` documents (every query's page among them), `queries`
 * of them with a usable description. Throws with the reason when the machine has too few pages.
 */
export function loadRetrievalSet(opts: { docs: number; queries: number; seed?: number; dirs?: string[] }): RetrievalSet {
  const dirs = opts.dirs ?? MAN_DIRS;
  const rnd = rng(opts.seed ?? 7);
  const files: string[] = [];
  for (const dir of dirs) {
    try {
      for (const f of readdirSync(dir)) if (f.endsWith('.gz') && !f.startsWith('gcloud')) files.push(path.join(dir, f));
    } catch {
      // A section this machine does not have.
    }
  }
  const dir = dirs.join(', ');
  // Symlinked aliases (e.g. zstdcat → zstd) are one page; read each real file once.
  const seenReal = new Set<string>();
  const seenText = new Set<string>();
  const pages: ManDoc[] = [];
  let tooShort = 0;
  for (const f of shuffle(files.sort(), rnd)) {
    if (pages.length >= opts.docs * 2) break;
    let real: string;
    try {
      real = realpathSync(f);
    } catch {
      continue;
    }
    if (seenReal.has(real)) continue;
    seenReal.add(real);
    let src: string;
    try {
      src = gunzipSync(readFileSync(real)).toString('utf8');
    } catch {
      continue;
    }
    if (/^\.so\s/m.test(src.slice(0, 200))) continue; // a redirect to another page
    const doc = parseManPage(path.basename(f).replace(/\.gz$/, ''), src);
    if (doc === 'no-name') continue;
    if (words(doc.text).length < 30) {
      tooShort++;
      continue;
    }
    const h = createHash('sha1').update(doc.text).digest('hex');
    if (seenText.has(h)) continue;
    seenText.add(h);
    pages.push(doc);
  }
  const docs = pages.slice(0, opts.docs);
  if (docs.length < opts.docs) throw new Error(`the retrieval set needs ${opts.docs} manual pages in ${dir}; found ${docs.length} usable`);

  // A description is a query when it is unambiguous (no other page has it), has 3–16 words, and
  // does not name its own command.
  const byDescription = new Map<string, number>();
  for (const d of pages) {
    const k = words(d.description).join(' ');
    byDescription.set(k, (byDescription.get(k) ?? 0) + 1);
  }
  let duplicates = 0;
  const candidates = docs.filter((d) => {
    const w = words(d.description);
    if ((byDescription.get(w.join(' ')) ?? 0) > 1) {
      duplicates++;
      return false;
    }
    if (w.length < 3 || w.length > 16) return false;
    const names = new Set(words(d.name));
    return !w.some((x) => names.has(x) && x.length > 2);
  });
  const queries = shuffle(candidates, rnd)
    .slice(0, opts.queries)
    .map((d) => ({ q: d.description, relevant: d.id }));
  if (queries.length < opts.queries) throw new Error(`the retrieval set needs ${opts.queries} queries; the pages gave ${queries.length}`);
  return { docs, queries, stats: { files: files.length, usable: pages.length, duplicates, tooShort } };
}
