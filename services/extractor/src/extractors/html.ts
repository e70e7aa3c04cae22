import { readFile, stat } from 'node:fs/promises';
import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';
import TurndownService from 'turndown';
import { PermanentError } from '@memstream/kit';
import { titleOf } from '../handlers/extract-text.js';
import type { ExtractResult, FileExtractor, Kind } from '../kinds.js';

/** The upload limit: an HTML file is read whole, and nothing larger can reach the extractor. */
const MAX_HTML_BYTES = 50 * 1024 * 1024;

const DOCUMENT_START = /^(?:\s|<!--[\s\S]*?-->|<\?xml[^>]*>)*<(?:!doctype\s+html|html[\s>])/i;

/** Elements common in HTML and rare in prose, so "a < b and c > d" or "use <T>" do not count. */
const TAG_NAMES =
  'a|abbr|article|aside|b|blockquote|body|br|button|caption|code|dd|details|div|dl|dt|em|figcaption|figure|footer|form|h[1-6]|head|header|hr|i|iframe|img|input|label|li|link|main|meta|nav|ol|option|p|pre|script|section|select|small|span|strong|style|sub|summary|sup|table|tbody|td|textarea|tfoot|th|thead|title|tr|u|ul';
const TAG_RE = new RegExp(`<(/?)(${TAG_NAMES})(?:\\s+[^<>]*)?/?>`, 'gi');
const LINE_TAG_RE = new RegExp(`</?(?:${TAG_NAMES})[\\s>/]`, 'i');

/**
 * Whether a string is an HTML document or fragment: it starts with a doctype or <html>, or it
 * is mostly markup of known elements (at least one element opened and closed, and tags on most
 * lines, or the whole string wrapped in tags). Markdown with a stray <br> or <details>, and
 * plain text with '<' in it, are not HTML.
 */
export function looksLikeHtml(s: string): boolean {
  if (DOCUMENT_START.test(s.slice(0, 4096))) return true;
  // A sample decides: this runs on every text submission, some of them megabytes long.
  const sample = s.slice(0, 200_000);
  const opened = new Set<string>();
  let closedOpened = false;
  let tags = 0;
  for (const m of sample.matchAll(TAG_RE)) {
    tags++;
    const name = m[2]!.toLowerCase();
    if (m[1]) closedOpened ||= opened.has(name);
    else opened.add(name);
  }
  if (tags < 2 || !closedOpened) return false;
  const trimmed = s.trim();
  if (/^<[a-z][a-z0-9]*[\s>]/i.test(trimmed) && trimmed.endsWith('>')) return true;
  const lines = sample.split('\n').filter((l) => l.trim() !== '');
  const tagged = lines.filter((l) => LINE_TAG_RE.test(l)).length;
  return tagged / lines.length >= 0.5;
}

/** linkedom builds no <html>/<body> around a fragment, and Readability needs both: wrap it. */
function asDocument(html: string): string {
  if (/<body[\s>]/i.test(html)) return html;
  const head = /<head[\s>][\s\S]*?<\/head>/i.exec(html)?.[0] ?? '';
  const rest = (head ? html.replace(head, '') : html).replace(/<!doctype[^>]*>|<\/?html(?:\s[^>]*)?>/gi, '');
  return `<!doctype html><html>${head || '<head></head>'}<body>${rest}</body></html>`;
}

// linkedom's DOM is typed against lib.dom, which this Node project does not load: describe the
// little of it used here.
interface El {
  tagName: string;
  textContent: string | null;
  innerHTML: string;
  getAttribute(name: string): string | null;
  setAttribute(name: string, value: string): void;
  remove(): void;
  closest(sel: string): El | null;
  querySelector(sel: string): El | null;
  querySelectorAll(sel: string): Iterable<El>;
}
interface Doc extends El {
  body: El | null;
  documentElement: El | null;
}

const clean = (s: string | null | undefined): string | null => {
  const t = s?.replace(/\s+/g, ' ').trim();
  return t ? t : null;
};

/** Make links and image sources absolute, so they still lead somewhere once out of the page. */
function absolutise(doc: Doc, pageUrl: string | null): void {
  let base: URL | null = null;
  try {
    const href = doc.querySelector('base[href]')?.getAttribute('href');
    base = href ? new URL(href, pageUrl ?? undefined) : pageUrl ? new URL(pageUrl) : null;
  } catch {
    base = pageUrl ? new URL(pageUrl) : null;
  }
  if (!base) return;
  for (const [sel, attr] of [
    ['a[href]', 'href'],
    ['img[src]', 'src'],
  ] as const) {
    for (const el of doc.querySelectorAll(sel)) {
      const v = el.getAttribute(attr);
      if (!v || v.startsWith('#') || /^(?:data|javascript|mailto|tel):/i.test(v)) continue;
      try {
        el.setAttribute(attr, new URL(v, base).href);
      } catch {
        // A malformed URL stays as written.
      }
    }
  }
}

/** Never content: code, styling, embeds, and controls. */
const NOT_CONTENT = ['script', 'style', 'noscript', 'template', 'iframe', 'object', 'embed', 'svg', 'canvas', 'form', 'button', 'input', 'select', 'textarea', 'title', 'meta', 'link'];
/**
 * Page furniture, removed from a whole page before Readability reads it: Readability scores it
 * low, but on a short page it may still keep it. A header inside the article (its title and
 * byline) stays.
 */
const BOILERPLATE = ['nav', 'aside', 'footer', '[role=navigation]', '[role=complementary]', '[role=contentinfo]', '[aria-hidden=true]'];
const PAGE_HEADER = ['header', '[role=banner]'];

function dropBoilerplate(doc: Doc): void {
  for (const sel of BOILERPLATE) for (const el of [...doc.querySelectorAll(sel)]) el.remove();
  for (const sel of PAGE_HEADER) for (const el of [...doc.querySelectorAll(sel)]) if (!el.closest('article, main, [role=main]')) el.remove();
}

function markdownService(): TurndownService {
  const td = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-', emDelimiter: '_', strongDelimiter: '**', hr: '---' });
  td.remove(NOT_CONTENT as TurndownService.TagName[]);
  // A data: URI is kilobytes of base64 that no reader or embedding model can use: keep the alt text.
  td.addRule('dataImage', {
    filter: (node) => node.nodeName === 'IMG' && /^data:/i.test(node.getAttribute('src') ?? ''),
    replacement: (_content, node) => clean(node.getAttribute('alt')) ?? '',
  });
  // "- item" and "1. item" rather than turndown's "-   item": the form most Markdown is written in.
  // Continuation lines are indented to the item's text, which is what nests them in CommonMark.
  td.addRule('listItem', {
    filter: 'li',
    replacement: (content, node) => {
      const parent = node.parentNode;
      let prefix = '- ';
      if (parent?.nodeName === 'OL') {
        const start = Number(parent.getAttribute('start') ?? 1);
        prefix = `${(Number.isFinite(start) ? start : 1) + Array.prototype.indexOf.call(parent.children, node)}. `;
      }
      const paragraph = /\n$/.test(content);
      const body = content.replace(/^\n+|\n+$/g, '') + (paragraph ? '\n' : '');
      return prefix + body.replace(/\n/g, `\n${' '.repeat(prefix.length)}`) + (node.nextSibling ? '\n' : '');
    },
  });
  // Links that lead nowhere outside the page are just their text.
  td.addRule('deadLink', {
    filter: (node) => node.nodeName === 'A' && /^(?:#|javascript:|data:)/i.test(node.getAttribute('href') ?? ''),
    replacement: (content) => content,
  });
  // Tables as GFM pipe tables (turndown's core has no table rule and would put every cell on its own line).
  td.addRule('tableCell', {
    filter: ['th', 'td'],
    replacement: (content) => ` ${content.replace(/\s*\n+\s*/g, ' ').replace(/\|/g, '\\|').trim()} |`,
  });
  td.addRule('tableRow', {
    filter: 'tr',
    replacement: (content) => `\n|${content}`,
  });
  td.addRule('table', {
    filter: 'table',
    replacement: (content) => {
      const rows = content.split('\n').filter((r) => r.startsWith('|'));
      const first = rows[0];
      if (!first) return '\n\n';
      const cells = (first.match(/(?<!\\)\|/g)?.length ?? 1) - 1;
      const sep = `|${' --- |'.repeat(Math.max(1, cells))}`;
      return `\n\n${[first, sep, ...rows.slice(1)].join('\n')}\n\n`;
    },
  });
  td.addRule('tableSection', {
    filter: ['thead', 'tbody', 'tfoot'],
    replacement: (content) => content,
  });
  return td;
}

let service: TurndownService | null = null;

function toMarkdown(html: string): string {
  service ??= markdownService();
  return service
    .turndown(html)
    .replace(/[ \t]+$/gm, '')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/**
 * An HTML document or fragment as Markdown: the main content of a page (Readability drops
 * navigation, sidebars and footers), or the whole of a fragment. `url` is the page's address
 * when it was fetched, for relative links and the document type.
 */
export function extractHtmlString(html: string, url: string | null): ExtractResult {
  const fullDocument = DOCUMENT_START.test(html.slice(0, 4096)) || /<body[\s>]/i.test(html.slice(0, 200_000));
  const { document } = parseHTML(asDocument(html)) as unknown as { document: Doc };
  absolutise(document, url);
  if (fullDocument) dropBoilerplate(document);
  const docTitle = clean(document.querySelector('title')?.textContent);
  const firstHeading = clean(document.querySelector('h1, h2, h3, h4, h5, h6')?.textContent);
  const h1 = clean(document.querySelector('h1')?.textContent);

  let contentHtml: string | null = null;
  let title: string | null = null;
  if (fullDocument) {
    // Readability rewrites the document it reads; the fallback below parses again if needed.
    // keepClasses keeps "language-x" on <code>, which turndown turns into the fence's language.
    const article = new Readability(document as never, { keepClasses: true }).parse();
    if (article?.content && clean(article.textContent)) {
      contentHtml = article.content;
      title = clean(article.title);
      // Readability keeps "Post | Site" when cutting the site name leaves a short title; the
      // page's own <h1> is the post's title without it.
      if (title && h1 && title !== h1 && title.includes(h1)) title = h1;
    }
  }
  if (contentHtml === null) {
    // A fragment is all content (someone chose to submit it); a page Readability could not read
    // is the body minus its furniture.
    const { document: again } = parseHTML(asDocument(html)) as unknown as { document: Doc };
    absolutise(again, url);
    if (fullDocument) dropBoilerplate(again);
    const body = again.body ?? again.documentElement;
    contentHtml = body?.innerHTML ?? '';
  }

  let text = toMarkdown(contentHtml);
  title ??= docTitle ?? firstHeading ?? titleOf(text);
  // Readability removes the heading that repeats the title; put it back so the chunker sees the
  // document's top heading.
  if (title && fullDocument && !new RegExp(`^#{1,6}\\s+${escapeRe(title)}\\s*$`, 'm').test(text)) text = `# ${title}\n\n${text}`;
  return { title, type: url ? 'webpage' : 'text', text, format: 'markdown', url };
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The encoding an HTML file declares: a byte-order mark, the declared MIME type's charset, a <meta>, or an XML declaration. */
export function declaredCharset(bytes: Uint8Array, mimeType: string | null): string | null {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return 'utf-8';
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return 'utf-16le';
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return 'utf-16be';
  const fromMime = /;\s*charset\s*=\s*"?([\w.:-]+)/i.exec(mimeType ?? '')?.[1];
  if (fromMime) return fromMime.toLowerCase();
  // Declarations are ASCII and, per the HTML spec, within the first 1024 bytes; look a little further.
  const head = Buffer.from(bytes.subarray(0, 4096)).toString('latin1');
  const meta = /<meta[^>]*?charset\s*=\s*["']?\s*([\w.:-]+)/i.exec(head)?.[1] ?? /<\?xml[^>]*encoding\s*=\s*["']([\w.:-]+)/i.exec(head)?.[1];
  if (!meta) return null;
  // A <meta> naming UTF-16 was read by an ASCII-compatible decoder to be found at all (HTML spec).
  return /^utf-?16/i.test(meta) ? 'utf-8' : meta.toLowerCase();
}

/** Windows-1252 characters at 0x80–0x9F (0 where the code page leaves a byte undefined). */
const CP1252_HIGH = [
  0x20ac, 0, 0x201a, 0x0192, 0x201e, 0x2026, 0x2020, 0x2021, 0x02c6, 0x2030, 0x0160, 0x2039, 0x0152, 0, 0x017d, 0,
  0, 0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014, 0x02dc, 0x2122, 0x0161, 0x203a, 0x0153, 0, 0x017e, 0x0178,
];

function decodeWith(label: string, bytes: Uint8Array): string {
  const decoder = new TextDecoder(label);
  const text = decoder.decode(bytes);
  if (decoder.encoding !== 'windows-1252') return text;
  // Node 20 decodes windows-1252 (and the latin1 / iso-8859-1 / ascii labels that mean it) as
  // ISO-8859-1, leaving curly quotes and dashes as C1 control characters: map them.
  return text.replace(/[\u0080-\u009f]/g, (c) => {
    const cp = CP1252_HIGH[c.charCodeAt(0) - 0x80];
    return cp ? String.fromCharCode(cp) : c;
  });
}

/** Decode with the declared charset; undeclared bytes that are not UTF-8 are windows-1252, as browsers assume. */
export function decodeHtml(bytes: Uint8Array, mimeType: string | null): string {
  const label = declaredCharset(bytes, mimeType);
  if (label) {
    try {
      return decodeWith(label, bytes);
    } catch {
      // An unknown label: fall through to the undeclared case.
    }
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return decodeWith('windows-1252', bytes);
  }
}

/** Elements that never have content, so never deepen the tree. */
const VOID_ELEMENTS = new Set('area base br col embed hr img input link meta param source track wbr'.split(' '));
const OPEN_CLOSE_RE = /<(\/?)([a-zA-Z][a-zA-Z0-9-]*)\b[^>]*?(\/?)>/g;

/**
 * How deeply the markup nests, by counting tags (an estimate: unclosed <p> and <li> count as
 * open). Real pages stay under a hundred or so; the parsers downstream (Readability, turndown)
 * slow down worse than linearly with depth — 1,000 nested <div>s took 17 s, 3,000 did not finish
 * in 100 s — so deep markup is parsed in the sandbox, where a time limit applies.
 */
export function htmlDepth(html: string, stopAt = Infinity): number {
  let depth = 0;
  let max = 0;
  for (const m of html.matchAll(OPEN_CLOSE_RE)) {
    const name = m[2]!.toLowerCase();
    if (m[1]) depth = Math.max(0, depth - 1);
    else if (!m[3] && !VOID_ELEMENTS.has(name)) {
      depth++;
      if (depth > max && (max = depth) >= stopAt) return max;
    }
  }
  return max;
}

/** Deeper than this, HTML is parsed in the sandbox rather than in the extractor's own process. */
export const MAX_IN_PROCESS_HTML_DEPTH = 256;

/** HTML files, uploaded or fetched. */
export const htmlExtractor: FileExtractor = {
  kinds: ['html'] satisfies Kind[],
  async extract(file) {
    const { size } = await stat(file.path);
    if (size > MAX_HTML_BYTES) throw new PermanentError(`${file.filename ?? 'the HTML file'} is larger than ${MAX_HTML_BYTES / 1048576} MB`);
    const html = decodeHtml(await readFile(file.path), file.mimeType);
    const out = extractHtmlString(html, null);
    return { ...out, title: out.title ?? file.filename?.replace(/\.[^.]+$/, '') ?? null };
  },
};
