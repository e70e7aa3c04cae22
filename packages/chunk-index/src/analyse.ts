/**
 * Text analysis for keyword search, shared by every adapter so a word means the same thing in
 * SQLite and in Qdrant: words (as FTS5's unicode61 sees them, diacritics folded), Porter2 stems,
 * English stop words dropped from queries, and word bigrams for a small proximity boost.
 */
import { STOPWORDS } from '@memstream/contracts';
import stemWord from 'wink-porter2-stemmer';

/** At most this many distinct words of a keyword query are used: bounds the cost of one query. */
export const MAX_QUERY_TERMS = 32;

/**
 * The words of a text, lower-cased, in order (with repeats). A word is a run of letters, digits
 * and combining marks — the same notion of a token as FTS5's unicode61 tokenizer, so the words
 * we quote into an FTS5 query are words FTS5 also indexed.
 */
export function tokenize(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}\p{M}]+/gu) ?? [];
}

/** English function words: queries drop them (see @memstream/contracts' STOPWORDS). */
export { STOPWORDS };

const WORD_CACHE_MAX = 200_000;

/**
 * The Porter2 stem of a lower-case word. Words with digits or non-Latin letters are kept as they
 * are: the stemmer is English. (Texts are analysed through analyseWord, which memoises it.)
 */
export function stem(word: string): string {
  return /^[a-z]+$/.test(word) ? stemWord(word) || word : word;
}

/** Diacritics folded (é → e), as FTS5's `remove_diacritics 2`. */
function fold(word: string): string {
  return /[^\u0000-\u007f]/.test(word) ? word.normalize('NFD').replace(/\p{M}+/gu, '') || word : word;
}

/** One analysed word: its folded stem, and whether it is a stop word. */
interface Word {
  term: string;
  stop: boolean;
}

const WORDS = new Map<string, Word>();

/** The analysed form of a lower-case token, memoised (a corpus has far fewer distinct words than words: one look-up per word of a text). */
function analyseWord(token: string): Word {
  let w = WORDS.get(token);
  if (w === undefined) {
    const f = fold(token);
    w = { term: stem(f), stop: STOPWORDS.has(f) };
    if (WORDS.size >= WORD_CACHE_MAX) WORDS.clear();
    WORDS.set(token, w);
  }
  return w;
}

/** The analysed words of a text in order: folded, stemmed; `stop` marks a stop word. Shared objects: read only. */
function analyse(text: string): Word[] {
  return tokenize(text).map(analyseWord);
}

/**
 * Adjacent pairs of content words, stop words skipped ("list of the directory contents" gives
 * list_directori, directori_content), joined by `_`: one token for FTS5 with `tokenchars '_'`.
 */
function bigramsOf(words: Word[]): string[] {
  const out: string[] = [];
  let previous: string | null = null;
  for (const w of words) {
    if (w.stop) continue;
    if (previous !== null) out.push(`${previous}_${w.term}`);
    previous = w.term;
  }
  return out;
}

/** What a chunk contributes to the keyword index: its stems (stop words included) and its bigrams. */
export function documentTerms(text: string): { terms: string[]; bigrams: string[] } {
  const words = analyse(text);
  return { terms: words.map((w) => w.term), bigrams: bigramsOf(words) };
}

/**
 * The distinct stems of a query, capped at MAX_QUERY_TERMS, without stop words — unless the
 * query is nothing but stop words ("to be or not to be"), which is then searched as it is — and
 * the bigrams of its content words.
 */
export function analyseQuery(text: string): { terms: string[]; bigrams: string[] } {
  const words = analyse(text);
  const content = words.filter((w) => !w.stop);
  const terms = [...new Set((content.length ? content : words).map((w) => w.term))].slice(0, MAX_QUERY_TERMS);
  const bigrams = [...new Set(bigramsOf(words))].slice(0, MAX_QUERY_TERMS);
  return { terms, bigrams };
}

/** The distinct stems of a query (see analyseQuery). */
export function queryTerms(text: string): string[] {
  return analyseQuery(text).terms;
}
