/**
 * Retrieval quality over the manual-page test set (test/retrieval/manpages.ts): recall@10 and
 * MRR@10 for dense-only, keyword-only and hybrid search on the embedded default index, with the
 * default embedder (static; `--embedder hashed` for the other offline model) — or an ONNX model
 * directory (`--onnx <dir>`), the same port.
 *
 *   ./memstream bench retrieval [--docs 3000] [--queries 500] [--seed 7] [--json]
 *
 * Figures, not assertions (test/retrieval.int.test.ts holds the floors).
 */
import { cpus, loadavg } from 'node:os';
import { loadEmbedder } from '../packages/embedder/src/index.js';
import { HashedEmbedder } from '../packages/embedder/src/hashed.js';
import type { Embedder } from '../packages/embedder/src/port.js';
import { evaluate, formatEvaluation } from '../test/retrieval/evaluate.js';
import { loadRetrievalSet } from '../test/retrieval/manpages.js';
import { generateConversations } from '../test/retrieval/conversations.js';
import { evaluateConversations, formatConversationEvaluation } from '../test/retrieval/evaluate-conversations.js';
import { commandArgs } from '@memstream/cli';

const USAGE = `usage: ./memstream bench retrieval [--docs 3000] [--queries 500] [--seed 7] [--onnx DIR | --embedder hashed|static]
         [--sweep 0,0.1,0.2 --floors 0.2] [--conversations 60] [--only manpages|conversations] [--json]

recall@10 and MRR@10 of dense, keyword and hybrid search, and of the default search of /v3/search
and /v4/search (through the gateway's handlers), over the manual-page test set, and
evidence recall over generated multi-session conversations.`;
const { values } = commandArgs('bench retrieval', USAGE, {
  options: {
    docs: { type: 'string', default: '3000' },
    queries: { type: 'string', default: '500' },
    seed: { type: 'string', default: '7' },
    onnx: { type: 'string' },
    // hashed | static: the offline model to measure (default: the services' default, static).
    embedder: { type: 'string' },
    // Also run hybrid at each dense weight of this list (e.g. 0,0.1,0.2,0.3) × each floor of --floors.
    sweep: { type: 'string' },
    floors: { type: 'string', default: '0.2' },
    // Generated multi-session conversations for the evidence-recall part (0 skips it).
    conversations: { type: 'string', default: '60' },
    // Only one part: manpages | conversations.
    only: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});

if (values.embedder !== undefined && values.embedder !== 'hashed' && values.embedder !== 'static') throw new Error(`--embedder: hashed or static, not ${values.embedder}`);
// Without --onnx or --embedder: the services' default model, static (packages/embedder/src/env.ts).
const embedder: Embedder = values.onnx
  ? await loadEmbedder({ kind: 'onnx', modelDir: values.onnx })
  : values.embedder === 'hashed'
    ? new HashedEmbedder()
    : await loadEmbedder({ kind: 'static' });
const sweep = (values.sweep ?? '')
  .split(',')
  .filter(Boolean)
  .flatMap((w) => values.floors.split(',').map((f) => ({ denseWeight: Number(w), denseFloor: Number(f) })));
if (!values.json) console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, load ${loadavg()[0]!.toFixed(2)}, node ${process.version}`);
if (values.only !== 'conversations') {
  const set = loadRetrievalSet({ docs: Number(values.docs), queries: Number(values.queries), seed: Number(values.seed) });
  const e = await evaluate(set, embedder, { sweep, endpoints: true });
  if (values.json) console.log(JSON.stringify({ ...e, set: set.stats }));
  else {
    console.log(`pages read: ${set.stats.usable} usable of ${set.stats.files} files (${set.stats.duplicates} ambiguous descriptions not used as queries)`);
    console.log(formatEvaluation(e));
  }
}
if (values.only !== 'manpages' && Number(values.conversations) > 0) {
  const convs = generateConversations({ count: Number(values.conversations), seed: Number(values.seed) });
  const c = await evaluateConversations(convs, embedder, { sweep });
  console.log(values.json ? JSON.stringify(c) : formatConversationEvaluation(c));
}
