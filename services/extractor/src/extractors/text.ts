import { readFile } from 'node:fs/promises';
import { PermanentError, looksLikeConversation, parseMessageArray } from '@memstream/kit';
import { extractText, titleOf } from '../handlers/extract-text.js';
import type { ExtractResult, FileExtractor, Kind, SourceFile } from '../kinds.js';

/** Plain text files are read whole: they are at most the 50 MB upload limit. */
async function readUtf8(file: SourceFile): Promise<string> {
  const bytes = await readFile(file.path);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new PermanentError(`${file.filename ?? 'the file'} is not valid UTF-8 text`);
  }
}

/**
 * A conversation, with speakers and turns kept as "role: text" lines (one turn per line group),
 * so the chunker can split between turns.
 */
export function extractConversation(content: string): ExtractResult {
  const messages = parseMessageArray(content);
  const text = messages ? messages.map((m) => `${m.role}: ${m.content.trim()}`).join('\n\n') : content.replace(/\r\n?/g, '\n');
  const first = messages?.[0]?.content ?? text;
  return { title: titleOf(first), type: 'text', text, format: 'conversation' };
}

/** Text in a string: a conversation, Markdown or plain text. */
export function extractString(content: string): ExtractResult {
  if (looksLikeConversation(content)) return extractConversation(content);
  return extractText(content);
}

/** Text, Markdown, JSON and source code files. */
export const textExtractor: FileExtractor = {
  kinds: ['text', 'markdown', 'json', 'code', 'conversation'] satisfies Kind[],
  async extract(file, kind) {
    const content = await readUtf8(file);
    const name = file.filename?.replace(/\.[^.]+$/, '') ?? null;
    switch (kind) {
      case 'markdown':
        return { ...extractText(content), format: 'markdown', title: titleOf(content) ?? name };
      case 'json':
        if (parseMessageArray(content)) return extractConversation(content);
        // Pretty-printed so keys and values fall on their own lines and chunk cleanly.
        try {
          return { title: file.filename, type: 'text', text: JSON.stringify(JSON.parse(content), null, 2), format: 'plain' };
        } catch {
          return { title: file.filename, type: 'text', text: content, format: 'plain' };
        }
      case 'code':
        return { title: file.filename, type: 'text', text: content.replace(/\r\n?/g, '\n'), format: 'plain' };
      default: {
        const out = extractString(content);
        return { ...out, title: out.title ?? name };
      }
    }
  },
};
