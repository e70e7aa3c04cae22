import type { ExtractedData } from '@memstream/contracts';

const MD_SIGNS = [/^#{1,6}\s+\S/m, /^\s*[-*+]\s+\S/m, /^\s*\d+\.\s+\S/m, /^```/m, /\[[^\]]+\]\([^)]+\)/, /^>\s/m, /\*\*[^*]+\*\*/];

/** Markdown when at least two of its usual marks appear (one alone is common in plain prose). */
export function looksLikeMarkdown(text: string): boolean {
  let n = 0;
  for (const re of MD_SIGNS) if (re.test(text)) n++;
  return n >= 2 || /^#{1,6}\s+\S/m.test(text);
}

/** A title: the first heading, else the first non-empty line, cut to 80 characters at a word. */
export function titleOf(text: string): string | null {
  const heading = /^#{1,6}\s+(.+)$/m.exec(text);
  const line = heading?.[1] ?? text.split('\n').find((l) => l.trim() !== '');
  if (!line) return null;
  const clean = line.replace(/[*_`#>]/g, '').replace(/\s+/g, ' ').trim();
  if (clean.length <= 80) return clean || null;
  const cut = clean.slice(0, 80);
  const sp = cut.lastIndexOf(' ');
  return (sp > 40 ? cut.slice(0, sp) : cut) + '…';
}

/** Plain text and Markdown: the text itself, normalised to \n line ends, with its title and format. */
export function extractText(content: string): Omit<ExtractedData, 'url'> {
  const text = content.replace(/\r\n?/g, '\n').replace(/\u0000/g, '');
  const markdown = looksLikeMarkdown(text);
  return { title: titleOf(text), type: 'text', text, format: markdown ? 'markdown' : 'plain' };
}
