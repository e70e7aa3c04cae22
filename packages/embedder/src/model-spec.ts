import { embedderEnv } from './env.js';
import type { Embedder } from './port.js';

type EmbedderEnvKey = keyof typeof embedderEnv;

/** The settings a model spec may set; secrets (EMBEDDING_API_KEY) and rate limits stay each process's own. */
const SPEC_KEYS: readonly EmbedderEnvKey[] = ['EMBEDDER', 'EMBEDDING_DIM', 'EMBEDDING_MODEL', 'EMBEDDING_BASE_URL', 'ONNX_MODEL_DIR', 'ONNX_POOLING'];

/**
 * A model spec of `memstream replay embed --model`, as the embedding settings it stands for:
 * `hashed:<dim>`, `static`, `openai:<model>[:<dim>]` (the endpoint from EMBEDDING_BASE_URL), `onnx:<dir>`.
 * The result is stored with the active model in NATS KV, so every process builds the same model
 * from its own environment plus these settings. Throws with the reason on a bad spec.
 */
export function modelSpecSettings(spec: string, env: { EMBEDDING_BASE_URL?: string | undefined } = {}): Record<string, string> {
  const colon = spec.indexOf(':');
  const kind = colon < 0 ? spec : spec.slice(0, colon);
  const rest = colon < 0 ? '' : spec.slice(colon + 1);
  switch (kind) {
    case 'hashed':
      return { EMBEDDER: 'hashed', EMBEDDING_DIM: rest || '384' };
    case 'static':
      if (rest) throw new Error(`model spec ${spec}: static takes no argument (the model built at install time)`);
      return { EMBEDDER: 'static' };
    case 'openai': {
      const m = /^(.+?)(?::(\d+))?$/.exec(rest);
      if (!m) throw new Error(`model spec ${spec}: expected openai:<model>[:<dim>]`);
      return {
        EMBEDDER: 'openai',
        EMBEDDING_MODEL: m[1]!,
        ...(m[2] ? { EMBEDDING_DIM: m[2] } : {}),
        ...(env.EMBEDDING_BASE_URL ? { EMBEDDING_BASE_URL: env.EMBEDDING_BASE_URL } : {}),
      };
    }
    case 'onnx':
      if (!rest) throw new Error(`model spec ${spec}: expected onnx:<model folder>`);
      return { EMBEDDER: 'onnx', ONNX_MODEL_DIR: rest };
    default:
      throw new Error(`model spec ${spec}: unknown kind ${kind} (hashed:<dim>, static, openai:<model>[:<dim>], onnx:<dir>)`);
  }
}

/**
 * A process's parsed embedding settings with a stored model's settings laid over them: each
 * given setting is parsed by its own schema (so `EMBEDDING_DIM: '256'` becomes 256), the others
 * (the API key, rate limits, batch size) stay the process's. Throws on an invalid setting.
 */
export function withModelSettings<T extends object>(base: T, settings: Record<string, string> | undefined): T {
  if (!settings) return base;
  const out: Record<string, unknown> = { ...(base as Record<string, unknown>) };
  // A spec names the model completely: settings of the base's model that the spec does not give must not leak in.
  if (settings.EMBEDDER) for (const k of ['EMBEDDING_MODEL', 'EMBEDDING_DIM', 'ONNX_MODEL_DIR', 'ONNX_POOLING']) if (!(k in settings)) out[k] = undefined;
  for (const [k, v] of Object.entries(settings)) {
    if (!(SPEC_KEYS as readonly string[]).includes(k)) throw new Error(`model settings: ${k} cannot be set by a model spec`);
    out[k] = embedderEnv[k as EmbedderEnvKey].parse(v);
  }
  return out as T;
}

/**
 * Embedders by model settings, each built once: `get(undefined)` is the process's own model
 * (`fallback`), `get(settings)` the model those settings lay over the process's environment.
 * `build` turns the merged settings into an Embedder (the caller's, so it can add its rate limiter).
 */
export function modelCache<T extends object>(base: T, fallback: Embedder, build: (settings: T) => Promise<Embedder>) {
  const built = new Map<string, Promise<Embedder>>();
  return (settings: Record<string, string> | undefined): Promise<Embedder> => {
    if (!settings) return Promise.resolve(fallback);
    const key = JSON.stringify(Object.entries(settings).sort(([a], [b]) => a.localeCompare(b)));
    let e = built.get(key);
    if (!e) {
      e = build(withModelSettings(base, settings));
      built.set(key, e);
      e.catch(() => built.delete(key));
    }
    return e;
  };
}
