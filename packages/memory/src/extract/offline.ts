import * as chrono from 'chrono-node';
import { split } from 'sentence-splitter';
import type { MemoryCandidate, MemoryRecord } from '@memstream/contracts';
import { ATTRIBUTE_RULES, FAMILY_RULE, FORGET_RULES } from './rules.js';
import type { ExtractionInput, ExtractionResult, MemoryExtractor } from './port.js';

/**
 * The offline extractor, on every fresh install (memory-layer.md §4):
 * - sentences come from `sentence-splitter` (abbreviations such as "Dr." do not end one);
 *   in a conversation only the user's turns (and named speakers') are read, one turn at a time;
 * - a sentence one of the closed attribute rules recognises becomes that attribute's statement
 *   ("The user lives in Berlin."), static, with its (subject, attribute, value); a negation rule
 *   ("I no longer live in Lisbon") becomes a `forget`; whatever else the sentence says, if it
 *   is more than a few words, is also kept verbatim;
 * - any other sentence of four words or more that is not a question is kept verbatim, with
 *   first-person words replaced by the subject ("I" → "Priya Raman"), not static;
 * - dates are parsed with chrono-node against the document date (event dates); a sentence about
 *   a future date that is plainly temporary (an exam, an appointment, "tomorrow") expires a day
 *   after it (`forgetAfter`); an attribute never expires.
 * It does not: understand paraphrase, resolve third-person pronouns, merge facts across
 * sentences, or decide that two differently worded statements contradict each other.
 */
export class OfflineExtractor implements MemoryExtractor {
  readonly name = 'offline-rules@1';

  async extract(input: ExtractionInput): Promise<ExtractionResult> {
    const reference = new Date(input.documentDate);
    const knownName = nameFrom(input.existing) ?? nameInText(input.text) ?? nameInContext(input.entityContext);
    const candidates: MemoryCandidate[] = [];
    for (const turn of turnsOf(input.text, input.format)) {
      if (turn.skip) continue;
      const subject = turn.speaker ?? knownName ?? 'The user';
      const subjectKey = turn.speaker ? turn.speaker.toLowerCase() : 'user';
      for (const sentence of sentencesOf(turn.text)) candidates.push(...fromSentence(sentence, subject, subjectKey, reference));
    }
    return { candidates: dedupe(candidates), tokens: 0 };
  }
}

interface Turn {
  speaker: string | null;
  text: string;
  /** An assistant's or system's turn: it states no fact about the user. */
  skip: boolean;
}

const TURN_LINE = /^\s*(?:\[[^\]]{1,40}\]\s*)?([A-Za-z][\w .'-]{0,30}?)\s*:\s+(.*)$/;
const USER_ROLES = new Set(['user', 'human', 'me', 'customer', 'client', 'patient']);
const OTHER_ROLES = new Set(['assistant', 'system', 'ai', 'bot', 'model', 'agent', 'tool']);

function turnsOf(text: string, format: ExtractionInput['format']): Turn[] {
  if (format !== 'conversation') return [{ speaker: null, text, skip: false }];
  const turns: Turn[] = [];
  for (const line of text.split('\n')) {
    const m = TURN_LINE.exec(line);
    if (m) {
      const role = m[1]!.trim();
      const lower = role.toLowerCase();
      turns.push({ speaker: USER_ROLES.has(lower) || OTHER_ROLES.has(lower) ? null : role, text: m[2]!, skip: OTHER_ROLES.has(lower) });
    } else if (turns.length && line.trim()) {
      turns[turns.length - 1]!.text += `\n${line}`;
    }
  }
  return turns.length ? turns : [{ speaker: null, text, skip: false }];
}

function sentencesOf(text: string): string[] {
  return split(text.replace(/^#+\s+/gm, ''))
    .filter((n) => n.type === 'Sentence')
    .map((n) => n.raw.replace(/\s+/g, ' ').trim())
    .filter((s) => s.length > 0);
}

function fromSentence(sentence: string, subject: string, subjectKey: string, reference: Date): MemoryCandidate[] {
  const out: MemoryCandidate[] = [];
  const dates = eventDates(sentence, reference);
  const base = { eventDates: dates, forgetAfter: forgetAfterOf(sentence, reference), sourceText: sentence, updates: [], extends: [] };
  let rest = sentence;
  for (const rule of FORGET_RULES) {
    const m = rule.re.exec(sentence);
    if (!m) continue;
    out.push({ ...base, memory: sentence, isStatic: false, attribute: { subject: subjectKey, key: rule.key, value: (m[1] ?? '').trim() }, action: 'forget', forgetAfter: null });
    rest = rest.replace(m[0], ' ');
  }
  if (out.length === 0) {
    for (const rule of ATTRIBUTE_RULES) {
      const m = rule.re.exec(rest);
      if (!m || !m[1]) continue;
      const value = m[1].trim();
      // An attribute is a lasting trait: "I joined Bosch this week" does not expire with the week.
      out.push({ ...base, memory: rule.render(subject, value), isStatic: rule.static, attribute: { subject: subjectKey, key: rule.key, value }, action: 'remember', forgetAfter: null });
      rest = rest.replace(m[0], ' ');
    }
    const fam = FAMILY_RULE.exec(rest);
    if (fam) {
      const rel = fam[1]!.toLowerCase();
      out.push({ ...base, memory: `${subject}'s ${rel} is ${fam[2]}.`, isStatic: true, attribute: { subject: subjectKey, key: `family:${rel}`, value: fam[2]! }, action: 'remember', forgetAfter: null });
      rest = rest.replace(fam[0], ' ');
    }
  }
  // What the rules did not take: kept verbatim when it still says something.
  const leftover = contentWords(rest);
  const isQuestion = /\?\s*$/.test(sentence);
  if (!isQuestion && leftover >= 4) {
    out.push({ ...base, memory: resolveFirstPerson(sentence, subject), isStatic: false, attribute: null, action: 'remember' });
  }
  return out;
}

const FILLER = new Set('a an and the of to in on at for with but or so is are was were be been i me my you your it its that this there then just also very really too and'.split(' '));

function contentWords(s: string): number {
  return (s.toLowerCase().match(/[\p{L}\p{N}']+/gu) ?? []).filter((w) => !FILLER.has(w)).length;
}

function eventDates(sentence: string, reference: Date): string[] {
  try {
    return chrono.parse(sentence, reference, { forwardDate: false }).map((r) => r.start.date().toISOString());
  } catch {
    return [];
  }
}

const TEMPORARY = /\b(tomorrow|tonight|this (?:afternoon|evening|weekend)|next (?:week|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|exam|appointment|meeting|interview|flight|deadline|dentist|doctor's)\b/i;

/** A plainly temporary fact about a future date expires the day after it. */
function forgetAfterOf(sentence: string, reference: Date): string | null {
  if (!TEMPORARY.test(sentence)) return null;
  const future = chrono
    .parse(sentence, reference, { forwardDate: true })
    .map((r) => (r.end ?? r.start).date().getTime())
    .filter((t) => t > reference.getTime());
  if (future.length === 0) return null;
  return new Date(Math.max(...future) + 24 * 3600_000).toISOString();
}

// Verbs that take no -s after "he/she": modals and common past forms.
const NO_S = /^(can|could|will|would|shall|should|may|might|must|did|had|was|were|went|got|made|moved|lived|worked|used|never|always|also|just|still|often|usually|really|recently|already|only|once|now|then)$/i;

function thirdPerson(verb: string): string {
  const lower = verb.toLowerCase();
  if (lower === 'am') return 'is';
  if (lower === 'have') return 'has';
  if (lower === 'do') return 'does';
  if (lower === 'go') return 'goes';
  if (NO_S.test(verb) || /ed$/i.test(verb)) return verb;
  if (/(s|sh|ch|x|z|o)$/i.test(verb)) return `${verb}es`;
  if (/[^aeiou]y$/i.test(verb)) return `${verb.slice(0, -1)}ies`;
  return `${verb}s`;
}

/** "I live in Lisbon and my sister visits" → "Priya lives in Lisbon and Priya's sister visits". */
export function resolveFirstPerson(sentence: string, subject: string): string {
  return sentence
    .replace(/\bI'm\b/g, `${subject} is`)
    .replace(/\bI've\b/g, `${subject} has`)
    .replace(/\bI'll\b/g, `${subject} will`)
    .replace(/\bI'd\b/g, `${subject} would`)
    .replace(/\bI (\w+)/g, (_m, v: string) => `${subject} ${thirdPerson(v)}`)
    .replace(/\bI\b/g, subject)
    .replace(/\b[Mm]y\b/g, `${subject}'s`)
    .replace(/\b[Mm]yself\b/g, subject)
    .replace(/\bme\b/g, subject);
}

function nameFrom(existing: MemoryRecord[]): string | null {
  const m = existing.find((x) => x.isLatest && !x.isForgotten && x.attribute?.subject === 'user' && x.attribute.key === 'name');
  return m ? m.attribute!.value : null;
}

function nameInText(text: string): string | null {
  const rule = ATTRIBUTE_RULES.find((r) => r.key === 'name');
  const m = rule?.re.exec(text);
  return m?.[1] ?? null;
}

const CONTEXT_NAME = [
  /\b(?:user|person|customer|patient|client|owner)(?:'s name)?\s+is\s+(?:named\s+|called\s+)?([A-Z][\p{L}'’-]+(?:\s+[A-Z][\p{L}'’-]+){0,3})/u,
  /\b(?:about|for|with|named|called|this is)\s+([A-Z][\p{L}'’-]+(?:\s+[A-Z][\p{L}'’-]+){0,3})/u,
  /^\s*([A-Z][\p{L}'’-]+(?:\s+[A-Z][\p{L}'’-]+){0,3})\s+(?:is|was|works|lives)\b/u,
];

/** The subject an entityContext names ("Notes about Priya Raman, a nurse" → "Priya Raman"). */
export function nameInContext(context: string | null): string | null {
  if (!context) return null;
  for (const re of CONTEXT_NAME) {
    const m = re.exec(context);
    if (m?.[1] && !/^(The|This|These|User|Users|A|An)$/.test(m[1])) return m[1];
  }
  return null;
}

function dedupe(cs: MemoryCandidate[]): MemoryCandidate[] {
  const seen = new Set<string>();
  return cs.filter((c) => {
    const k = `${c.action}|${c.memory.toLowerCase()}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
