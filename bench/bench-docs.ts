/** The ingest and memorizer benchmarks' documents: deterministic, varied, ~2 KB each. */
const VOCAB = ('memory stream ledger replay chunk vector index broker durable consumer revision projection tombstone payload ' +
  'subject sequence window backoff redelivery snapshot tenant container search recall embedding token paragraph heading ' +
  'document extract pipeline gateway service process replica cluster storage latency throughput').split(' ');

/** A deterministic ~2 KB document: varied sentences in paragraphs, under a heading. */
export function makeDoc(i: number): string {
  let seed = i * 2654435761 + 1;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const sentence = () => {
    const n = 8 + Math.floor(rnd() * 10);
    const w = Array.from({ length: n }, () => VOCAB[Math.floor(rnd() * VOCAB.length)]);
    return w.join(' ').replace(/^./, (c) => c.toUpperCase()) + '.';
  };
  let out = `# Bench document ${i}\n\n`;
  while (out.length < 2048) {
    out += Array.from({ length: 4 }, sentence).join(' ') + '\n\n';
  }
  return out.slice(0, 2048);
}
