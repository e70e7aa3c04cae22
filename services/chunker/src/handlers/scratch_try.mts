import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { chunkText, countTokens } from './chunk.js';
let t0 = performance.now();
countTokens('warm');
console.log('codec init', (performance.now()-t0).toFixed(0));
t0 = performance.now();
const ref = new Tiktoken(o200k);
console.log('lib init', (performance.now()-t0).toFixed(0));
const samples = ["Hello world, it's 2024! I'm here; they've gone.", '<|endoftext|> special', '😀😀😀👩‍👩‍👧‍👦 emoji', '我们今天讨论向量数据库和嵌入模型的设计。没有空格的中文文本',
 'function f(x) {\n  return x * 2;\n}\n\n\n   trailing   ', 'ÀÉÎÕÜ café naïve', '1234567890 3.14159', 'المرحبا بالعالم', 'नमस्ते दुनिया', '\t\t  \n\n  x', "DON'T WON'T I'LL", 'https://example.com/a/b?c=d&e=f'];
for (const s of samples) { const a = ref.encode(s, [], []); const b = countTokens(s); if (a.length !== b) console.log('MISMATCH', JSON.stringify(s), a.length, b); }
// big varied
const words = 'the quick brown fox jumps over lazy dog embedding vector index chunk stream memory service token'.split(' ');
let s=''; let i=0; while (s.length < 1_000_000) { s += words[(i*7+3)%words.length] + (i%13===0?'. ':' ') + (i%97===0?'\n\n':''); i++; }
t0 = performance.now(); const n1 = countTokens(s); console.log('count 1MB', (performance.now()-t0).toFixed(0), n1, ref.encode(s,[],[]).length);
t0 = performance.now(); const chunks = chunkText(s, 'plain'); console.log('chunk 1MB plain', (performance.now()-t0).toFixed(0), chunks.length, Math.max(...chunks.map(c=>c.tokens)));
const cjk = '我们今天讨论向量数据库和嵌入模型的设计，没有空格的中文文本也要处理好'.repeat(3000);
t0 = performance.now(); const cc = chunkText(cjk, 'plain'); console.log('cjk nopunct', cjk.length, (performance.now()-t0).toFixed(0), cc.length, Math.max(...cc.map(c=>c.tokens)), cc.map(c=>c.text).join('') === cjk);
const emo = '😀🎉🚀'.repeat(10000);
t0 = performance.now(); const ce = chunkText(emo, 'plain'); console.log('emoji run', emo.length, (performance.now()-t0).toFixed(0), ce.length, Math.max(...ce.map(c=>c.tokens)), ce.map(c=>c.text).join('') === emo);
t0 = performance.now(); console.log(countTokens(emo), ref.encode(emo.slice(0,3000),[],[]).length, countTokens(emo.slice(0,3000)), (performance.now()-t0).toFixed(0));
