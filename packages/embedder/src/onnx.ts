import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { EmbeddingDimensionError } from './openai.js';
import type { Embedder } from './port.js';

/** How token vectors become one text vector; `mean` (over the attention mask) suits most sentence-transformers. */
export type OnnxPooling = 'mean' | 'cls';

export interface OnnxEmbedderOptions {
  /**
   * The model folder: config.json, tokenizer.json, tokenizer_config.json and the fp32 graph as
   * onnx/model.onnx (transformers.js / Hugging Face "onnx-community" layout) or model.onnx
   * (what `optimum-cli export onnx` writes). Weights in a model.onnx_data file beside it are found too.
   */
  modelDir: string;
  /** The dimension the deployment expects (EMBEDDING_DIM); checked against the model's at load. */
  dim?: number | undefined;
  /** Texts per forward pass (default 64); a larger `embed` call runs several passes. */
  batchSize?: number | undefined;
  /**
   * Default: what the folder's sentence-transformers `1_Pooling/config.json` says, else `mean`.
   * The vectors are always L2-normalised.
   */
  pooling?: OnnxPooling | undefined;
}

/** The files a model folder must hold, as a list of problems (empty when the folder is usable). */
export function onnxModelDirProblems(modelDir: string): string[] {
  const dir = path.resolve(modelDir);
  if (!existsSync(dir)) return [`${dir} does not exist`];
  if (!statSync(dir).isDirectory()) return [`${dir} is not a directory`];
  const problems: string[] = [];
  for (const f of ['config.json', 'tokenizer.json', 'tokenizer_config.json']) {
    if (!existsSync(path.join(dir, f))) problems.push(`${f} is missing from ${dir}`);
  }
  if (onnxGraphPath(dir) === undefined) problems.push(`neither onnx/model.onnx nor model.onnx is in ${dir} (an fp32 export is needed)`);
  return problems;
}

/** onnx/model.onnx first (the Hub layout), then model.onnx (optimum's). */
function onnxGraphPath(dir: string): string | undefined {
  for (const p of [path.join(dir, 'onnx', 'model.onnx'), path.join(dir, 'model.onnx')]) if (existsSync(p)) return p;
  return undefined;
}

/**
 * A local sentence-embedding model run by onnxruntime through transformers.js, entirely offline:
 * `env.allowRemoteModels = false`, `local_files_only`, the model given as an absolute path (so
 * it is never taken for a Hub id), and the library's file cache off. A missing file is an error
 * naming the path, never a download.
 *
 * The vector length is the model's, found at load by embedding a probe text; a configured `dim`
 * that differs stops the load. The name `onnx:<folder>:<dim>:<fingerprint>` carries a SHA-256
 * prefix of the graph and tokenizer files, so re-exporting different weights into a folder of the
 * same name is a new model to the index rather than silently mixed vectors.
 *
 * Texts longer than the tokenizer's `model_max_length` (often 256 or 512 word pieces) are
 * truncated by the pipeline, as sentence-transformers does.
 */
export class OnnxEmbedder implements Embedder {
  readonly model: string;
  readonly dim: number;
  private readonly batchSize: number;
  private readonly pooling: OnnxPooling;
  private readonly extractor: Extractor;

  private constructor(fields: { model: string; dim: number; batchSize: number; pooling: OnnxPooling; extractor: Extractor }) {
    this.model = fields.model;
    this.dim = fields.dim;
    this.batchSize = fields.batchSize;
    this.pooling = fields.pooling;
    this.extractor = fields.extractor;
  }

  /** Checks the folder, loads tokenizer and graph, and measures the dimension. */
  static async load(options: OnnxEmbedderOptions): Promise<OnnxEmbedder> {
    const dir = path.resolve(options.modelDir);
    const problems = onnxModelDirProblems(dir);
    if (problems.length > 0) throw new Error(`ONNX model folder unusable: ${problems.join('; ')}`);
    const batchSize = options.batchSize ?? 64;
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError(`OnnxEmbedder: batchSize must be a positive integer, got ${batchSize}`);
    const pooling = options.pooling ?? poolingOf(dir);
    const graph = onnxGraphPath(dir) as string;

    // Imported here, not at the top: onnxruntime and transformers.js take a second and a few
    // hundred MB to load, which the hashed and openai embedders never need.
    const { env, pipeline } = await import('@huggingface/transformers');
    env.allowRemoteModels = false;
    env.allowLocalModels = true;
    // The library's file cache lives inside node_modules and only ever holds downloads.
    env.useFSCache = false;
    env.useBrowserCache = false;
    env.localModelPath = path.dirname(dir);
    const extractor = (await pipeline('feature-extraction', dir, {
      local_files_only: true,
      dtype: 'fp32',
      device: 'cpu',
      subfolder: path.dirname(graph) === dir ? '' : 'onnx',
    })) as unknown as Extractor;

    const probe = await runBatch(extractor, ['memstream dimension probe'], pooling);
    const dim = probe.dims[1] as number;
    if (options.dim !== undefined && options.dim !== dim) {
      throw new EmbeddingDimensionError(
        `the ONNX model in ${dir} returns ${dim}-dimensional vectors but EMBEDDING_DIM is ${options.dim}: set EMBEDDING_DIM=${dim} or leave it unset`,
      );
    }
    const fingerprint = await fingerprintOf(dir, graph);
    return new OnnxEmbedder({ model: `onnx:${path.basename(dir)}:${dim}:${fingerprint}`, dim, batchSize, pooling, extractor });
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    const out = new Array<Float32Array>(texts.length);
    // Shortest first: the pipeline pads each batch to its longest text, so batching texts of
    // similar length wastes less work on padding. The output goes back in input order.
    const order = texts.map((_, i) => i).sort((a, b) => (texts[a] as string).length - (texts[b] as string).length);
    for (let i = 0; i < order.length; i += this.batchSize) {
      const positions = order.slice(i, i + this.batchSize);
      const result = await runBatch(this.extractor, positions.map((p) => texts[p] as string), this.pooling);
      const dim = result.dims[1] as number;
      if (dim !== this.dim) throw new EmbeddingDimensionError(`the ONNX model returned ${dim}-dimensional vectors after loading with ${this.dim}`);
      positions.forEach((p, j) => {
        const v = result.data.slice(j * dim, (j + 1) * dim);
        out[p] = checkedUnit(v, p);
      });
    }
    return out;
  }
}

/** The slice of transformers.js's FeatureExtractionPipeline used here. */
type Extractor = (texts: string[], options: { pooling: OnnxPooling; normalize: boolean }) => Promise<{ dims: number[]; data: Float32Array }>;

async function runBatch(extractor: Extractor, texts: string[], pooling: OnnxPooling): Promise<{ dims: number[]; data: Float32Array }> {
  const result = await extractor(texts, { pooling, normalize: true });
  if (result.dims.length !== 2 || result.dims[0] !== texts.length || !(result.data instanceof Float32Array)) {
    throw new Error(
      `the ONNX model's output pooled to shape [${result.dims.join(', ')}] (${result.data?.constructor?.name}), not [${texts.length}, dim] float32: ` +
        'it must output last_hidden_state [batch, sequence, dim]',
    );
  }
  return result;
}

/** The pipeline already normalised; this rejects what normalising cannot fix (NaN, all zeros). */
function checkedUnit(v: Float32Array, at: number): Float32Array {
  let sumSquares = 0;
  for (const x of v) sumSquares += x * x;
  if (!Number.isFinite(sumSquares) || Math.abs(Math.sqrt(sumSquares) - 1) > 1e-3) {
    throw new Error(`the ONNX model gave text ${at} a vector of norm ${Math.sqrt(sumSquares)}, not a unit vector (an all-zero or non-finite output)`);
  }
  return v;
}

/** sentence-transformers records its pooling in 1_Pooling/config.json; absent, mean pooling. */
function poolingOf(dir: string): OnnxPooling {
  const file = path.join(dir, '1_Pooling', 'config.json');
  if (!existsSync(file)) return 'mean';
  const c = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  if (c.pooling_mode_mean_tokens === true) return 'mean';
  if (c.pooling_mode_cls_token === true) return 'cls';
  // Max and last-token pooling are not offered: the pipeline's last-token pooling ignores
  // right padding, so it would be wrong for every text but the longest of a batch.
  throw new Error(`${file} asks for a pooling mode other than mean or cls, which is not supported; set ONNX_POOLING to override`);
}

/** 12 hex digits of SHA-256 over the files that decide the vectors. */
async function fingerprintOf(dir: string, graph: string): Promise<string> {
  const h = createHash('sha256');
  const files = [graph, `${graph}_data`, path.join(dir, 'tokenizer.json'), path.join(dir, 'tokenizer_config.json')];
  for (const f of files) {
    if (!existsSync(f)) continue;
    h.update(`${path.basename(f)}\n`);
    for await (const chunk of createReadStream(f)) h.update(chunk as Buffer);
  }
  return h.digest('hex').slice(0, 12);
}
