import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * A tiny, self-made sentence-embedding model in the layout transformers.js loads from disk:
 *
 *   <dir>/config.json            a BERT config (model_type "bert")
 *   <dir>/tokenizer.json         a BERT WordPiece tokenizer with a small vocabulary
 *   <dir>/tokenizer_config.json
 *   <dir>/onnx/model.onnx        one Gather over an embedding table: last_hidden_state = table[input_ids]
 *
 * Nothing is downloaded: the ONNX protobuf is written by the small encoder below. With mean
 * pooling and normalisation (what OnnxEmbedder asks the pipeline for), a text's vector is the
 * normalised mean of its tokens' rows, i.e. a static word-embedding model.
 *
 * Each row is the sum of fixed pseudo-random vectors of the token's character trigrams (with
 * word-boundary marks) plus one of the token itself, so tokens that share spelling are close
 * ("index" / "indexes"), texts that share words are close, and unrelated texts are not. That is
 * enough for tests to tell a working pipeline (right tokens, right pooling) from a broken one.
 */
export interface TinyModel {
  /** The folder to point ONNX_MODEL_DIR at. */
  dir: string;
  dim: number;
  vocabSize: number;
}

/** Writes the model into `dir` (created if needed) and returns its description. */
export function writeTinyModel(dir: string, options: { dim?: number; externalData?: boolean } = {}): TinyModel {
  const dim = options.dim ?? 64;
  const vocab = buildVocab();
  const table = embeddingTable(vocab, dim);
  mkdirSync(path.join(dir, 'onnx'), { recursive: true });
  const graph = gatherModel(vocab.length, dim, table, options.externalData === true);
  writeFileSync(path.join(dir, 'onnx', 'model.onnx'), graph.model);
  if (graph.externalData) writeFileSync(path.join(dir, 'onnx', 'model.onnx_data'), graph.externalData);
  writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(tokenizerJson(vocab), null, 1));
  writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(TOKENIZER_CONFIG, null, 1));
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify(modelConfig(vocab.length, dim), null, 1));
  return { dir, dim, vocabSize: vocab.length };
}

// ---------------------------------------------------------------------------------------------
// Vocabulary and tokenizer

const SPECIALS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] as const;

const WORDS = `
the a an and or of to in on at by for with from as is are was were be been it this that these those
not no yes all any some more most other such only own same so than too very can will just should now
i you he she we they me him her us them my your his its our their what which who whom when where why how
cat cats dog dogs mat sat sit sitting kitchen door warm near house home garden tree trees bird birds
password reset forgot forgotten account settings page change login user users email sign
revenue quarterly grew grow growth percent cloud sales profit market company money bank price
oven bake bread minutes golden recipe cook cooking food flour sugar butter
trail hiking pine forest ridge mountain river lake walk
vector vectors embedding embeddings index indexes indexed search query document documents chunk chunks
chunker token tokens model models memory stream event events broker message messages queue replay
markdown heading headings split text split counted count
`.trim().split(/\s+/);

/** Specials, then whole words, then every lowercase letter and digit alone and as a `##` suffix piece. */
function buildVocab(): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  const add = (t: string) => {
    if (!seen.has(t)) {
      seen.add(t);
      out.push(t);
    }
  };
  for (const t of SPECIALS) add(t);
  for (const w of WORDS) add(w);
  // Single characters keep any unknown word tokenizable (WordPiece falls back to pieces rather
  // than [UNK]), so two different unknown words still get different vectors.
  const chars = 'abcdefghijklmnopqrstuvwxyz0123456789';
  for (const c of chars) add(c);
  for (const c of chars) add(`##${c}`);
  for (const p of '.,;:!?\'"()-/') add(p);
  return out;
}

function tokenizerJson(vocab: string[]): unknown {
  const ids = Object.fromEntries(vocab.map((t, i) => [t, i]));
  const special = (content: string) => ({
    id: ids[content],
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  const cls = ids['[CLS]'] as number;
  const sep = ids['[SEP]'] as number;
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIALS.map(special),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
      pair: [
        { SpecialToken: { id: '[CLS]', type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '[SEP]', type_id: 0 } },
        { Sequence: { id: 'B', type_id: 1 } },
        { SpecialToken: { id: '[SEP]', type_id: 1 } },
      ],
      special_tokens: {
        '[CLS]': { id: '[CLS]', ids: [cls], tokens: ['[CLS]'] },
        '[SEP]': { id: '[SEP]', ids: [sep], tokens: ['[SEP]'] },
      },
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab: ids },
  };
}

const TOKENIZER_CONFIG = {
  tokenizer_class: 'BertTokenizer',
  do_lower_case: true,
  model_max_length: 512,
  clean_up_tokenization_spaces: true,
  cls_token: '[CLS]',
  sep_token: '[SEP]',
  pad_token: '[PAD]',
  unk_token: '[UNK]',
  mask_token: '[MASK]',
};

function modelConfig(vocabSize: number, dim: number): unknown {
  return {
    model_type: 'bert',
    architectures: ['BertModel'],
    vocab_size: vocabSize,
    hidden_size: dim,
    num_hidden_layers: 0,
    num_attention_heads: 1,
    max_position_embeddings: 512,
    type_vocab_size: 2,
    pad_token_id: 0,
  };
}

// ---------------------------------------------------------------------------------------------
// The embedding table

/** Deterministic N(0,1)-ish values from a string seed: xorshift32 seeded by FNV-1a, summed (Irwin–Hall). */
function seededVector(seed: string, dim: number): Float32Array {
  let h = 0x811c9dc5;
  for (let i = 0; i < seed.length; i++) h = Math.imul(h ^ seed.charCodeAt(i), 0x01000193);
  let s = h >>> 0 || 1;
  const next = () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 0x1_0000_0000;
  };
  const v = new Float32Array(dim);
  for (let i = 0; i < dim; i++) v[i] = next() + next() + next() + next() - 2;
  return v;
}

/** Rows: [PAD] is zero (padding never counts), other specials small, word pieces from spelling. */
function embeddingTable(vocab: string[], dim: number): Float32Array {
  const table = new Float32Array(vocab.length * dim);
  vocab.forEach((token, row) => {
    if (token === '[PAD]') return;
    const acc = new Float32Array(dim);
    const addScaled = (v: Float32Array, k: number) => {
      for (let i = 0; i < dim; i++) acc[i] = (acc[i] as number) + k * (v[i] as number);
    };
    if ((SPECIALS as readonly string[]).includes(token)) {
      // [CLS]/[SEP] frame every text: kept small so they barely pull unrelated texts together.
      addScaled(seededVector(`special:${token}`, dim), 0.2);
    } else {
      const piece = token.startsWith('##') ? token.slice(2) : token;
      const marked = `${token.startsWith('##') ? '' : '^'}${piece}$`;
      // Single characters (the pieces of words outside the vocabulary) and punctuation say
      // little about a text, as in a real model: they weigh less than whole words.
      const weight = piece.length > 1 ? 1 : 0.25;
      addScaled(seededVector(`token:${token}`, dim), weight);
      for (let i = 0; i + 3 <= marked.length; i++) addScaled(seededVector(`tri:${marked.slice(i, i + 3)}`, dim), 0.7 * weight);
    }
    table.set(acc, row * dim);
  });
  return table;
}

// ---------------------------------------------------------------------------------------------
// ONNX as protobuf: just the fields this graph needs (onnx/onnx.proto3)

const WIRE_VARINT = 0;
const WIRE_LEN = 2;

/** A growable protobuf message writer. */
class Pb {
  private readonly parts: Uint8Array[] = [];

  private varint(value: number | bigint): void {
    let v = BigInt(value);
    // Negative int64 values are written as 10-byte two's complement, as protobuf does.
    if (v < 0n) v += 1n << 64n;
    const bytes: number[] = [];
    do {
      let b = Number(v & 0x7fn);
      v >>= 7n;
      if (v !== 0n) b |= 0x80;
      bytes.push(b);
    } while (v !== 0n);
    this.parts.push(Uint8Array.from(bytes));
  }

  private key(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  int(field: number, value: number | bigint): this {
    this.key(field, WIRE_VARINT);
    this.varint(value);
    return this;
  }

  bytes(field: number, value: Uint8Array): this {
    this.key(field, WIRE_LEN);
    this.varint(value.length);
    this.parts.push(value);
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, new TextEncoder().encode(value));
  }

  message(field: number, value: Pb): this {
    return this.bytes(field, value.finish());
  }

  finish(): Uint8Array {
    const total = this.parts.reduce((n, p) => n + p.length, 0);
    const out = new Uint8Array(total);
    let at = 0;
    for (const p of this.parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}

const ONNX_FLOAT = 1;
const ONNX_INT64 = 7;

/** ValueInfoProto { name = 1; type = 2 } with TypeProto.tensor_type = 1 { elem_type = 1; shape = 2 { dim = 1 { dim_value = 1 | dim_param = 2 } } }. */
function valueInfo(name: string, elemType: number, dims: (string | number)[]): Pb {
  const shape = new Pb();
  for (const d of dims) shape.message(1, typeof d === 'number' ? new Pb().int(1, d) : new Pb().string(2, d));
  const tensorType = new Pb().int(1, elemType).message(2, shape);
  return new Pb().string(1, name).message(2, new Pb().message(1, tensorType));
}

/**
 * The whole ModelProto: inputs input_ids, attention_mask, token_type_ids; one Gather; output
 * last_hidden_state. With `external`, the table goes to a separate model.onnx_data file, as large
 * exports (over protobuf's 2 GB) have it.
 */
function gatherModel(vocabSize: number, dim: number, table: Float32Array, external: boolean): { model: Uint8Array; externalData?: Uint8Array } {
  const raw = new Uint8Array(table.length * 4);
  const view = new DataView(raw.buffer);
  table.forEach((x, i) => view.setFloat32(i * 4, x, true));
  // TensorProto { dims = 1; data_type = 2; name = 8; raw_data = 9 (little-endian); external_data = 13
  // (StringStringEntryProto { key = 1; value = 2 }); data_location = 14 (EXTERNAL = 1) }
  const initializer = new Pb().int(1, vocabSize).int(1, dim).int(2, ONNX_FLOAT).string(8, 'embeddings.word_embeddings.weight');
  if (external) {
    for (const [k, v] of [['location', 'model.onnx_data'], ['offset', '0'], ['length', String(raw.length)]] as const) {
      initializer.message(13, new Pb().string(1, k).string(2, v));
    }
    initializer.int(14, 1);
  } else {
    initializer.bytes(9, raw);
  }

  // NodeProto { input = 1; output = 2; name = 3; op_type = 4; attribute = 5 }, AttributeProto { name = 1; i = 3; type = 20 (INT = 2) }
  const gather = new Pb()
    .string(1, 'embeddings.word_embeddings.weight')
    .string(1, 'input_ids')
    .string(2, 'last_hidden_state')
    .string(3, 'embed')
    .string(4, 'Gather')
    .message(5, new Pb().string(1, 'axis').int(3, 0).int(20, 2));

  // GraphProto { node = 1; name = 2; initializer = 5; input = 11; output = 12 }. attention_mask and
  // token_type_ids are declared, as a BERT export declares them, though only input_ids is used:
  // the pipeline's mean pooling applies the mask itself.
  const graph = new Pb()
    .message(1, gather)
    .string(2, 'tiny-static-embeddings')
    .message(5, initializer)
    .message(11, valueInfo('input_ids', ONNX_INT64, ['batch_size', 'sequence_length']))
    .message(11, valueInfo('attention_mask', ONNX_INT64, ['batch_size', 'sequence_length']))
    .message(11, valueInfo('token_type_ids', ONNX_INT64, ['batch_size', 'sequence_length']))
    .message(12, valueInfo('last_hidden_state', ONNX_FLOAT, ['batch_size', 'sequence_length', dim]));

  // ModelProto { ir_version = 1; producer_name = 2; graph = 7; opset_import = 8 { domain = 1; version = 2 } }
  const model = new Pb()
    .int(1, 8)
    .string(2, 'memstream-tiny-model')
    .message(7, graph)
    .message(8, new Pb().string(1, '').int(2, 17))
    .finish();
  return external ? { model, externalData: raw } : { model };
}
