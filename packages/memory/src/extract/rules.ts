/**
 * The closed set of attribute rules of the offline extractor (memory-layer.md §4 b). Each rule
 * reads one first-person statement ("I live in Lisbon") and yields (attribute, value); a new
 * value of a single-valued attribute updates the old one, and a negation forgets it. Anything
 * these rules do not recognise is kept verbatim and never supersedes anything.
 */

/** Attributes with one value at a time: a new value replaces the old. */
export const SINGLE_VALUED = new Set(['name', 'lives_in', 'works_at', 'role', 'timezone', 'diet', 'pronouns', 'family:wife', 'family:husband', 'family:partner']);

// A proper-noun phrase: capitalised words, optionally joined by "de", "of", "-" (São Paulo, Rio de Janeiro).
const PLACE = String.raw`([A-Z][\p{L}'’-]*(?:\s+(?:(?:de|da|do|del|of|on|upon|am|im)\s+)?[A-Z][\p{L}'’-]*){0,4})`;
const NAME = String.raw`([A-Z][\p{L}'’-]+(?:\s+[A-Z][\p{L}'’-]+){0,3})`;
// The rest of a clause: up to a comma, "and", "but", "because", "since" or the end.
const CLAUSE = String.raw`([^,;.!?]{2,60}?)(?=\s*(?:[,;.!?]|\band\b|\bbut\b|\bbecause\b|\bsince\b|\bso\b|$))`;
const ROLE = String.raw`(?:an?\s+)?([a-z][a-z -]{1,40}?)(?=\s*(?:[,;.!?]|\bat\b|\bfor\b|\bin\b|\band\b|\bbut\b|\bsince\b|$))`;

export interface AttributeRule {
  key: string;
  re: RegExp;
  /** The statement the memory is kept as, for subject S and value v. */
  render(s: string, v: string): string;
  static: boolean;
}

const article = (v: string) => (/^[aeiou]/i.test(v) ? `an ${v}` : `a ${v}`);
const PETS = 'dog|cat|puppy|kitten|parrot|rabbit|hamster|horse|turtle|fish|bird';
const DIETS = 'vegan|vegetarian|pescatarian|keto|gluten-free|lactose intolerant|kosher|halal';
const FAMILY = 'wife|husband|partner|son|daughter|mother|father|mom|dad|brother|sister|boyfriend|girlfriend';

const u = (s: string) => new RegExp(s, 'iu');
// Case-sensitive where the value must be a proper noun (a place, a company, a name).
const cs = (s: string) => new RegExp(s, 'u');

export const ATTRIBUTE_RULES: AttributeRule[] = [
  { key: 'name', re: cs(String.raw`\b[Mm]y name is ${NAME}`), render: (_s, v) => `The user's name is ${v}.`, static: true },
  { key: 'name', re: cs(String.raw`\bI(?:'m| am) called ${NAME}`), render: (_s, v) => `The user's name is ${v}.`, static: true },
  { key: 'lives_in', re: cs(String.raw`\bI(?:\s+currently)?\s+(?:live|reside|am living|'m living|am based|'m based)\s+in\s+${PLACE}`), render: (s, v) => `${s} lives in ${v}.`, static: true },
  { key: 'lives_in', re: cs(String.raw`\bI(?:'ve| have)?\s+(?:just\s+|recently\s+)?(?:moved|relocated)\s+to\s+${PLACE}`), render: (s, v) => `${s} lives in ${v}.`, static: true },
  { key: 'lives_in', re: cs(String.raw`\bI(?:'m| am) (?:now )?(?:living|based) in ${PLACE}`), render: (s, v) => `${s} lives in ${v}.`, static: true },
  { key: 'works_at', re: cs(String.raw`\bI(?:\s+currently)?\s+work\s+(?:at|for)\s+${PLACE}`), render: (s, v) => `${s} works at ${v}.`, static: true },
  { key: 'works_at', re: cs(String.raw`\bI(?:'ve| have)?\s+(?:just\s+)?(?:joined|started (?:a job|working) at)\s+${PLACE}`), render: (s, v) => `${s} works at ${v}.`, static: true },
  { key: 'role', re: u(String.raw`\bI(?:\s+currently)?\s+(?:work|am working|'m working)\s+as\s+${ROLE}`), render: (s, v) => `${s} works as ${article(v)}.`, static: true },
  { key: 'role', re: u(String.raw`\b(?:I\s+(?:also\s+)?(?:work|am working)\s+in\s+[^,.]{2,40}?\s+)?and\s+work\s+as\s+${ROLE}`), render: (s, v) => `${s} works as ${article(v)}.`, static: true },
  { key: 'language', re: cs(String.raw`\bI speak ${PLACE}`), render: (s, v) => `${s} speaks ${v}.`, static: true },
  { key: 'timezone', re: u(String.raw`\bmy time ?zone is ([A-Za-z_/+:0-9-]{2,40})`), render: (s, v) => `${s}'s time zone is ${v}.`, static: true },
  { key: 'diet', re: u(String.raw`\bI(?:'m| am)\s+(?:a\s+)?(${DIETS})\b`), render: (s, v) => `${s} is ${v}.`, static: true },
  { key: 'pronouns', re: u(String.raw`\bmy pronouns are ([a-z]+/[a-z]+)`), render: (s, v) => `${s}'s pronouns are ${v}.`, static: true },
  { key: 'pet', re: u(String.raw`\bI have an? (${PETS})(?: (?:named|called) ${NAME})?`), render: (s, v) => `${s} has ${article(v)}.`, static: true },
  { key: 'likes', re: u(String.raw`\bI (?:really )?(?:love|like|enjoy|adore)\s+${CLAUSE}`), render: (s, v) => `${s} likes ${v}.`, static: true },
  { key: 'dislikes', re: u(String.raw`\bI (?:really )?(?:hate|dislike|can't stand|don't like|do not like)\s+${CLAUSE}`), render: (s, v) => `${s} dislikes ${v}.`, static: true },
];

/** Family members: "my sister is Ana", "my wife's name is Ana" → family:sister = Ana. */
export const FAMILY_RULE = new RegExp(String.raw`\b[Mm]y (${FAMILY})(?:'s name)? is ${NAME}`, 'u');

/**
 * Negations that forget an attribute: "I no longer live in Lisbon", "I quit my job at Acme",
 * "I'm not vegan anymore". The value, when given, must match the memory's.
 */
export const FORGET_RULES: Array<{ key: string; re: RegExp }> = [
  { key: 'lives_in', re: cs(String.raw`\bI (?:no longer|don't|do not) live in ${PLACE}`) },
  { key: 'works_at', re: cs(String.raw`\bI (?:no longer work|don't work|do not work|stopped working|quit(?: my job)?|left(?: my job)?)\s+(?:at|for)\s+${PLACE}`) },
  { key: 'works_at', re: u(String.raw`\bI (?:quit|lost|left) my job()`) },
  { key: 'role', re: u(String.raw`\bI (?:no longer|don't|do not) work as ${ROLE}`) },
  { key: 'diet', re: u(String.raw`\bI(?:'m| am) (?:no longer|not)\s+(?:a\s+)?(${DIETS})\b`) },
  { key: 'diet', re: u(String.raw`\bI (?:stopped being|quit being)\s+(?:a\s+)?(${DIETS})\b`) },
  { key: 'likes', re: u(String.raw`\bI (?:no longer|don't) (?:love|like|enjoy)\s+${CLAUSE}(?=.*\b(?:anymore|any more|now)\b)`) },
  { key: 'pet', re: u(String.raw`\bmy (${PETS}) (?:died|passed away|ran away)`) },
];
