import { chunkText } from './chunk.js';
const OPTS = { minTokens: Number(process.env.MIN ?? 128) };
function rng(seed: number) { let s = seed >>> 0; return () => { s = (s + 0x6d2b79f5) >>> 0; let t = s; t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; }; }
const subjects = ['The ingestion worker', 'Every replica', 'Our on-call engineer', 'The nightly compaction job', 'A misconfigured proxy', 'The search gateway', 'Each tenant', 'The billing service', 'An idle consumer', 'The schema registry'];
const verbs = ['retries', 'rejects', 'buffers', 'replays', 'compresses', 'indexes', 'throttles', 'acknowledges', 'forwards', 'validates'];
const objects = ['stale events', 'oversized payloads', 'duplicate messages', 'the embedding cache', 'partial uploads', 'expired sessions', 'malformed headers', 'queued deletions', 'cold partitions', 'hot keys'];
const tails = ['before the deadline expires', 'when the broker restarts', 'under sustained load', 'after a schema change', 'during the weekly maintenance window', 'unless an operator intervenes', 'so that readers never see torn writes', 'because the upstream clock drifts', 'while the disk is nearly full', 'without blocking the main loop'];
const r = rng(1);
const pick = <T,>(a: T[]): T => a[Math.floor(r() * a.length)] as T;
const sentence = () => `${pick(subjects)} ${pick(verbs)} ${pick(objects)} ${pick(tails)}.`;
const para = () => Array.from({ length: 2 + Math.floor(r() * 6) }, sentence).join(' ');
const paras = Array.from({ length: 400 }, para);
const doc = paras.join('\n\n');
const a = chunkText(doc, 'plain', OPTS);
console.log('chunks', a.length, 'avg', a.reduce((s, c) => s + c.tokens, 0) / a.length, 'min', Math.min(...a.map(c => c.tokens)));
const old = new Set(a.map(c => c.hash));
const hist: Record<number, number> = {};
for (let k = 0; k < paras.length; k++) {
  const p2 = paras.slice(); const words = (p2[k] as string).split(' '); words[Math.floor(words.length / 2)] = 'reworded'; p2[k] = words.join(' ');
  const b = chunkText(p2.join('\n\n'), 'plain', OPTS);
  const changed = b.filter(c => !old.has(c.hash)).length;
  hist[changed] = (hist[changed] ?? 0) + 1;
}
console.log('word edit', hist);
const hist2: Record<number, number> = {};
for (let k = 0; k < paras.length; k++) {
  const p2 = paras.slice(); p2[k] = p2[k] + ' ' + sentence();
  const b = chunkText(p2.join('\n\n'), 'plain', OPTS);
  const changed = b.filter(c => !old.has(c.hash)).length;
  hist2[changed] = (hist2[changed] ?? 0) + 1;
}
console.log('append sentence', hist2);
const hist3: Record<number, number> = {};
for (let k = 0; k < paras.length; k++) {
  const p2 = paras.slice(); p2[k] = 'Honestly, ' + p2[k];
  const b = chunkText(p2.join('\n\n'), 'plain', OPTS);
  const changed = b.filter(c => !old.has(c.hash)).length;
  hist3[changed] = (hist3[changed] ?? 0) + 1;
}
console.log('edit opening', hist3);
