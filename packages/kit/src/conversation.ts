/**
 * Conversations arrive as JSON message arrays or as "role: text" transcripts. The gateway uses
 * this to tell new messages sent for an existing conversation (appended) from a replacement,
 * and the extractor to keep speakers and turns.
 */
const TURN = /^\s*(?:\[[^\]]{1,40}\]\s*)?(?:\*\*)?([A-Za-z][\w .'-]{0,30}?)(?:\*\*)?\s*:\s+\S/;

/** Speaker-labelled lines ("user: hi") make up most non-empty lines, with at least two turns. */
export function looksLikeTranscript(text: string): boolean {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines.length < 2) return false;
  const turns = lines.filter((l) => TURN.test(l)).length;
  return turns >= 2 && turns / lines.length >= 0.5;
}

/** A JSON array of {role, content} messages. */
export function parseMessageArray(text: string): Array<{ role: string; content: string }> | null {
  const t = text.trim();
  if (!t.startsWith('[') || !t.endsWith(']')) return null;
  try {
    const v = JSON.parse(t) as unknown;
    if (!Array.isArray(v) || v.length === 0) return null;
    const out: Array<{ role: string; content: string }> = [];
    for (const m of v) {
      if (!m || typeof m !== 'object') return null;
      const o = m as Record<string, unknown>;
      const role = o.role ?? o.speaker ?? o.author ?? o.name;
      const content = o.content ?? o.text ?? o.message;
      if (typeof role !== 'string' || typeof content !== 'string') return null;
      out.push({ role, content });
    }
    return out;
  } catch {
    return null;
  }
}

export function looksLikeConversation(text: string): boolean {
  return parseMessageArray(text) !== null || looksLikeTranscript(text);
}

/**
 * Append new messages to a conversation, keeping its form: two JSON arrays become one array,
 * transcripts are joined by a line break.
 */
export function appendConversation(existing: string, added: string): string {
  const a = parseMessageArray(existing);
  const b = parseMessageArray(added);
  if (a && b) return JSON.stringify([...a, ...b]);
  return `${existing.replace(/\s+$/, '')}\n${added.replace(/^\s+/, '')}`;
}
