/**
 * English function words (the NLTK list, which is what the experiments behind issue 13 used), in
 * one place for the two things that ignore them:
 * - keyword queries (packages/chunk-index/src/analyse.ts): they carry almost no BM25 weight but
 *   make an OR query match most of the index ("number of last error" scored every chunk holding
 *   "of"). Documents still index them;
 * - the static word-vector model (packages/embedder/src/static-build.ts), which leaves them out
 *   of its table: summed into a sentence vector they pulled every short question towards every
 *   short chit-chat turn ("What is my dissertation about?" was nearest to "Noted. Let me know how
 *   it goes."); without them, conversational evidence recall at 1,000 tokens rose from 0.70 to
 *   0.90 (docs/search.md).
 */
export const STOPWORDS: ReadonlySet<string> = new Set(
  (
    'i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself ' +
    'it its itself they them their theirs themselves what which who whom this that these those am is are was were be ' +
    'been being have has had having do does did doing a an the and but if or because as until while of at by for with ' +
    'about against between into through during before after above below to from up down in out on off over under ' +
    'again further then once here there when where why how all any both each few more most other some such no nor not ' +
    'only own same so than too very s t can will just don should now d ll m o re ve y'
  ).split(' '),
);
