/**
 * In-memory postings of the keyword index's frequent tokens, so a keyword search does not ask
 * FTS5 for the OR of every query token.
 *
 * A sentence query's stems and bigrams match ~43% of the chunks at 100k chunks, almost all of
 * them through a few frequent stems. FTS5 evaluates such a query row by row (merging every
 * token's doclist, looking up each matching row's size, calling bm25() per row, sorting them
 * all), and bm25() also counts every token's rows once per query. Here the frequent tokens
 * (those in at least `minDocs` chunks when the postings were built) have their postings in typed
 * arrays and are scored term at a time into an accumulator; the rare ones are left to FTS5,
 * whose doclists for them are short by definition. The sum is the same BM25 as FTS5's bm25()
 * over the whole query: same k1 and b, same idf and average length (the caller passes FTS5's own
 * counts), same column weights, the same row length (stems plus bigrams).
 *
 * Rows are added and removed as the change log says (the index keeps them current); a removed
 * row's postings stay in the arrays and are skipped (`alive`), and the owner rebuilds when too
 * many are dead or the index has grown past what the token set was chosen for.
 */
import { documentTerms } from './analyse.js';

/** FTS5 bm25()'s constants. */
export const BM25_K1 = 1.2;
export const BM25_B = 0.75;

interface PostingList {
  /** Internal row numbers (never reused: a rowid that comes back gets a new one). */
  ids: Int32Array;
  /** How often the token occurs in the row (capped at 65,535). */
  tfs: Uint16Array;
  n: number;
  /** The column weight of bm25(): 1 for stems, the bigram weight for bigrams. */
  weight: number;
}

const ASCII = /^[\x00-\x7f]*$/;

/**
 * The tokens FTS5's unicode61 tokenizer (tokenchars '_') makes of one analysed token. The same
 * one for almost every token; but a "word" of combining marks alone (U+FE0F after an emoji) is
 * a word to analyse.ts and no token to FTS5, and a bigram with one loses that half.
 */
export function ftsTokens(token: string): string[] {
  return ASCII.test(token) ? [token] : (token.match(/[\p{L}\p{N}\p{Co}_]+/gu) ?? []);
}

export class FrequentPostings {
  /** The last chunk_changes seq applied. */
  seq = 0;
  /** The snapshot token (see SqliteChunkIndex) it was last known current at. */
  token = '';
  /** Internal row numbers handed out. */
  private size = 0;
  private rowids: Float64Array;
  /** Tokens in the row (stems and bigrams), as FTS5 counts a row's size. */
  private lens: Float64Array;
  private alive: Uint8Array;
  /** Postings entries of the row (how many frequent tokens it holds). */
  private rowEntries: Uint32Array;
  private acc: Float64Array;
  /** Rows with a nonzero accumulator in the current `top`. */
  private touched: Int32Array;
  private readonly idOf = new Map<number, number>();
  private readonly lists = new Map<string, PostingList>();
  /** Live rows. */
  live = 0;
  /** Live rows when built, and postings entries of removed rows. */
  readonly builtRows: number;
  private deadEntries = 0;
  private entries = 0;

  /**
   * `tokens`: the frequent tokens with their row counts at build time (sizes the arrays);
   * `bigramWeight`: bm25()'s weight of the bigram column.
   */
  constructor(
    tokens: Map<string, number>,
    readonly minDocs: number,
    private readonly bigramWeight: number,
    expectedRows: number,
  ) {
    for (const [token, docs] of tokens) {
      const cap = Math.max(4, docs + (docs >> 3));
      this.lists.set(token, { ids: new Int32Array(cap), tfs: new Uint16Array(cap), n: 0, weight: token.includes('_') ? bigramWeight : 1 });
    }
    const cap = Math.max(16, expectedRows + (expectedRows >> 3));
    this.rowids = new Float64Array(cap);
    this.lens = new Float64Array(cap);
    this.alive = new Uint8Array(cap);
    this.rowEntries = new Uint32Array(cap);
    this.acc = new Float64Array(cap);
    this.touched = new Int32Array(cap);
    this.builtRows = expectedRows;
  }

  /** Whether `token`'s postings are held here (else the caller scores it with FTS5). */
  has(token: string): boolean {
    return this.lists.has(token);
  }

  /** Frequent tokens held. */
  get tokenCount(): number {
    return this.lists.size;
  }

  /** Postings entries scored and rare rows added by the last `top`: the work a query did. */
  lastWork = { entries: 0, rareRows: 0 };

  /** Bytes held in typed arrays (postings and per-row arrays; the maps' own overhead is not counted). */
  get bytes(): number {
    let b = this.rowids.length * (8 + 8 + 1 + 4 + 8);
    for (const l of this.lists.values()) b += l.ids.byteLength + l.tfs.byteLength;
    return b;
  }

  /** Whether the postings should be built again: many removed rows, or a much changed size. */
  get stale(): boolean {
    return this.deadEntries > 0.3 * Math.max(this.entries, 1) || this.live > 2 * this.builtRows + 1000 || this.live < this.builtRows / 2 - 1000;
  }

  /** Add (or replace) the row `rowid` with its chunk text. */
  add(rowid: number, text: string): void {
    this.remove(rowid);
    const { terms, bigrams } = documentTerms(text);
    if (this.size === this.rowids.length) this.grow();
    const id = this.size++;
    let len = 0;
    const counts = new Map<string, number>();
    for (const part of [terms, bigrams]) {
      for (const t of part) {
        if (ASCII.test(t)) {
          len++;
          if (this.lists.has(t)) counts.set(t, (counts.get(t) ?? 0) + 1);
          continue;
        }
        for (const f of ftsTokens(t)) {
          len++;
          if (this.lists.has(f)) counts.set(f, (counts.get(f) ?? 0) + 1);
        }
      }
    }
    this.rowids[id] = rowid;
    this.lens[id] = len;
    this.alive[id] = 1;
    this.idOf.set(rowid, id);
    this.live++;
    for (const [t, c] of counts) {
      const list = this.lists.get(t)!;
      if (list.n === list.ids.length) {
        const cap = list.n * 2;
        const ids = new Int32Array(cap);
        ids.set(list.ids);
        const tfs = new Uint16Array(cap);
        tfs.set(list.tfs);
        list.ids = ids;
        list.tfs = tfs;
      }
      list.ids[list.n] = id;
      list.tfs[list.n] = Math.min(c, 65_535);
      list.n++;
    }
    this.rowEntries[id] = counts.size;
    this.entries += counts.size;
  }

  /** Remove the row `rowid` (nothing when it is not held). */
  remove(rowid: number): void {
    const id = this.idOf.get(rowid);
    if (id === undefined) return;
    this.idOf.delete(rowid);
    this.alive[id] = 0;
    this.live--;
    // Its postings entries stay, skipped; counted so the owner knows when to rebuild.
    this.deadEntries += this.rowEntries[id]!;
  }

  /**
   * The best `limit` rows by BM25 over the query: `frequent` tokens (with their idf) scored
   * here, plus `rare`, each matching row's BM25 over the other tokens (rowid, score), as FTS5
   * gives it. `allowed`: only these rowids (a tag, filter or model restriction). `avgLen`: the
   * average row length bm25() uses (FTS5's, which counts rows deleted since). Null when a
   * rare row is not held here (the postings are not at the caller's snapshot).
   */
  top(
    frequent: { token: string; idf: number }[],
    rare: Iterable<[number, number]>,
    limit: number,
    allowed: Set<number> | undefined,
    avgLen: number,
  ): { id: number; score: number }[] | null {
    const acc = this.acc;
    const touched = this.touched;
    const alive = this.alive;
    const lens = this.lens;
    const avgdl = avgLen > 0 ? avgLen : 1;
    let nt = 0;
    let entries = 0;
    let rareRows = 0;
    try {
      for (const [rowid, score] of rare) {
        const id = this.idOf.get(rowid);
        if (id === undefined) return null;
        if (acc[id] === 0) touched[nt++] = id;
        acc[id]! += score;
        rareRows++;
      }
      // MaxScore: the frequent tokens by idf, highest first. A token adds at most idf·(k1 + 1)
      // to a row, so once the k-th best sum so far beats what the tokens left can add together,
      // a row none of the tokens so far holds cannot reach the top k: the rest only complete
      // the rows that still can (looked up in their postings, which are in row order).
      const order = frequent.filter((t) => this.lists.has(t.token)).sort((x, y) => y.idf - x.idf);
      let remaining = 0;
      for (const t of order) remaining += t.idf * (BM25_K1 + 1.0);
      let max = 0;
      let i = 0;
      for (; i < order.length; i++) {
        if (nt >= limit && max > remaining && kthBest(acc, touched, nt, limit, this.rowids, allowed) > remaining * (1 + 1e-9)) break;
        const { token, idf } = order[i]!;
        const { ids, tfs, n, weight } = this.lists.get(token)!;
        entries += n;
        for (let j = 0; j < n; j++) {
          const id = ids[j]!;
          if (alive[id] === 0) continue;
          // FTS5's bm25(), written the same way.
          const f = tfs[j]! * weight;
          const s = idf * ((f * (BM25_K1 + 1.0)) / (f + BM25_K1 * (1 - BM25_B + (BM25_B * lens[id]!) / avgdl)));
          if (acc[id] === 0) touched[nt++] = id;
          const v = (acc[id]! += s);
          if (v > max) max = v;
        }
        remaining -= idf * (BM25_K1 + 1.0);
      }
      if (i === order.length) return selectTop(acc, touched, nt, this.rowids, limit, allowed);
      // Rows that can still reach the k-th best sum, completed from the remaining tokens.
      const theta = kthBest(acc, touched, nt, limit, this.rowids, allowed);
      let nc = 0;
      const cands = new Int32Array(nt);
      for (let c = 0; c < nt; c++) {
        const id = touched[c]!;
        if (acc[id]! + remaining * (1 + 1e-9) >= theta && (!allowed || allowed.has(this.rowids[id]!))) cands[nc++] = id;
      }
      const cand = cands.subarray(0, nc).sort();
      for (; i < order.length; i++) {
        const { token, idf } = order[i]!;
        const { ids, tfs, n, weight } = this.lists.get(token)!;
        let lo = 0;
        for (let c = 0; c < nc && lo < n; c++) {
          const id = cand[c]!;
          // Galloping then binary search from the last position: candidates are in row order too.
          let step = 1;
          let hi = lo;
          while (hi < n && ids[hi]! < id) {
            lo = hi + 1;
            hi += step;
            step *= 2;
          }
          if (hi > n) hi = n;
          while (lo < hi) {
            const mid = (lo + hi) >>> 1;
            if (ids[mid]! < id) lo = mid + 1;
            else hi = mid;
          }
          entries++;
          if (lo < n && ids[lo] === id) {
            const f = tfs[lo]! * weight;
            acc[id]! += idf * ((f * (BM25_K1 + 1.0)) / (f + BM25_K1 * (1 - BM25_B + (BM25_B * lens[id]!) / avgdl)));
          }
        }
      }
      return selectTop(acc, cand, nc, this.rowids, limit, allowed);
    } finally {
      for (let c = 0; c < nt; c++) acc[touched[c]!] = 0;
      this.lastWork = { entries, rareRows };
    }
  }

  private grow(): void {
    const cap = this.rowids.length * 2;
    const rowids = new Float64Array(cap);
    rowids.set(this.rowids);
    const lens = new Float64Array(cap);
    lens.set(this.lens);
    const alive = new Uint8Array(cap);
    alive.set(this.alive);
    this.rowids = rowids;
    this.lens = lens;
    this.alive = alive;
    const rowEntries = new Uint32Array(cap);
    rowEntries.set(this.rowEntries);
    this.rowEntries = rowEntries;
    this.acc = new Float64Array(cap);
    this.touched = new Int32Array(cap);
  }
}

/** The k-th best accumulated score among the touched rows that pass `allowed` (0 when fewer). */
function kthBest(acc: Float64Array, touched: Int32Array, nt: number, k: number, rowids: Float64Array, allowed: Set<number> | undefined): number {
  const heap = new Float64Array(k);
  let n = 0;
  for (let c = 0; c < nt; c++) {
    const id = touched[c]!;
    const s = acc[id]!;
    if (n === k && s <= heap[0]!) continue;
    if (allowed && !allowed.has(rowids[id]!)) continue;
    if (n < k) {
      let i = n++;
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (heap[p]! <= s) break;
        heap[i] = heap[p]!;
        i = p;
      }
      heap[i] = s;
      continue;
    }
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c2 = r < n && heap[r]! < heap[l]! ? r : l;
      if (heap[c2]! >= s) break;
      heap[i] = heap[c2]!;
      i = c2;
    }
    heap[i] = s;
  }
  return n < k ? 0 : heap[0]!;
}

/** The `limit` best rows of an accumulator (score > 0), best first; ties by rowid, as FTS5's ORDER BY rank, rowid. */
function selectTop(acc: Float64Array, list: Int32Array, size: number, rowids: Float64Array, limit: number, allowed: Set<number> | undefined): { id: number; score: number }[] {
  // A bounded min-heap over (score, -rowid).
  const hs = new Float64Array(limit);
  const hr = new Float64Array(limit);
  let n = 0;
  const worse = (s1: number, r1: number, s2: number, r2: number) => s1 < s2 || (s1 === s2 && r1 > r2);
  for (let c = 0; c < size; c++) {
    const id = list[c]!;
    const s = acc[id]!;
    if (s <= 0) continue;
    const r = rowids[id]!;
    if (n === limit && !worse(hs[0]!, hr[0]!, s, r)) continue;
    if (allowed && !allowed.has(r)) continue;
    if (n < limit) {
      let i = n++;
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (!worse(s, r, hs[p]!, hr[p]!)) break;
        hs[i] = hs[p]!;
        hr[i] = hr[p]!;
        i = p;
      }
      hs[i] = s;
      hr[i] = r;
      continue;
    }
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const rr = l + 1;
      let c = l;
      if (rr < n && worse(hs[rr]!, hr[rr]!, hs[l]!, hr[l]!)) c = rr;
      if (!worse(hs[c]!, hr[c]!, s, r)) break;
      hs[i] = hs[c]!;
      hr[i] = hr[c]!;
      i = c;
    }
    hs[i] = s;
    hr[i] = r;
  }
  const out: { id: number; score: number }[] = [];
  for (let i = 0; i < n; i++) out.push({ id: hr[i]!, score: hs[i]! });
  return out.sort((a, b) => b.score - a.score || a.id - b.id);
}
