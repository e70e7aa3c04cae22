/**
 * Conversation units: one chunk per turn, never a turn cut between chunks unless it alone is
 * longer than a chunk, and every chunk saying when and who: the session's date (from the last
 * session header line before it, e.g. "Session 2 · 2023-05-08" or "--- 2023-05-08 ---") and the
 * speaker label the turn starts with. A turn read alone, as search returns it, is then
 * self-contained ("[2023-05-08] user: we named the beagle Biscuit"), and search returns small
 * units instead of 500-token slabs of several turns. Appending messages adds chunks at the end
 * and leaves the earlier ones (and their embeddings) as they were.
 */

/**
 * A speaker label: up to three words and 40 characters before a colon and a space, optionally
 * after a "[time]" stamp, a quote marker or bold markup ("User: …", "**Dr. Lee:** …",
 * "[10:02] alice: …"). A false positive only starts a turn early, which costs little.
 */
const SPEAKER_LABEL =
  /^[ \t]*(?:>[ \t]*)?(?:\[[^\]\n]{1,40}\][ \t]*)?(?:\*\*|__)?(?=[^:\n]{1,40}:)[\p{L}\p{N}][\p{L}\p{N}_.'()@#-]*(?: [\p{L}\p{N}_.'()@#-]+){0,2}(?:\*\*|__)?:(?:\*\*|__)?(?:[ \t]|$)/u;

/** A line that is only a session header: short, with an ISO date, and not a speaker's turn. */
const SESSION_DATE = /\b(\d{4}-\d{2}-\d{2})\b/;

export interface Turn {
  /** The session's date (YYYY-MM-DD) when a header gave one. */
  date: string | null;
  /** The speaker label as written ("user", "Dr. Lee"), or null for text before the first label. */
  speaker: string | null;
  /** The turn's text, label included, ends trimmed. */
  text: string;
}

/** The turns of a transcript, each with the date of its session. */
export function conversationTurns(src: string): Turn[] {
  const turns: Turn[] = [];
  let date: string | null = null;
  let current: { speaker: string | null; lines: string[]; date: string | null } | null = null;
  const flush = () => {
    if (!current) return;
    const text = current.lines.join('\n').trim();
    if (text !== '') turns.push({ date: current.date, speaker: current.speaker, text });
    current = null;
  };
  for (const line of src.split('\n')) {
    const label = SPEAKER_LABEL.exec(line);
    if (!label) {
      const header = SESSION_DATE.exec(line);
      if (header && line.trim().length <= 80) {
        flush();
        date = header[1]!;
        continue;
      }
    }
    if (label) {
      flush();
      const speaker = line.slice(0, line.indexOf(':')).replace(/^[ \t>]*(?:\[[^\]\n]*\][ \t]*)?[*_]*/, '').replace(/[*_]+$/, '').trim();
      current = { speaker, lines: [line], date };
    } else if (current) {
      current.lines.push(line);
    } else if (line.trim() !== '') {
      current = { speaker: null, lines: [line], date };
    }
  }
  flush();
  return turns;
}

/** The line a turn's chunk opens with: its session date, when known. */
export function turnPrefix(date: string | null): string {
  return date ? `[${date}]` : '';
}

/**
 * The chunk texts of a conversation: each turn, prefixed with its session date; a turn longer
 * than `maxTokens` is split by `split` (the chunker's plain-text splitter) and each piece after
 * the first says whose turn it continues.
 */
export function conversationUnits(src: string, maxTokens: number, countTokens: (t: string) => number, split: (text: string, budget: number) => string[]): string[] {
  const out: string[] = [];
  for (const turn of conversationTurns(src)) {
    const prefix = turnPrefix(turn.date);
    const whole = prefix ? `${prefix} ${turn.text}` : turn.text;
    if (countTokens(whole) <= maxTokens) {
      out.push(whole);
      continue;
    }
    const cont = `${prefix ? `${prefix} ` : ''}${turn.speaker ?? ''} (continued):`.trim();
    const budget = Math.max(16, maxTokens - countTokens(cont) - 1);
    split(turn.text, budget).forEach((piece, i) => out.push(i === 0 ? (prefix ? `${prefix} ${piece}` : piece) : `${cont} ${piece}`));
  }
  return out;
}
