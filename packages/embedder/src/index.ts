import { HashedEmbedder } from './hashed.js';
import type { Embedder } from './port.js';

export type { Embedder } from './port.js';
export { HashedEmbedder } from './hashed.js';

/** How the embedder service picks its model; more kinds (remote APIs, local ONNX) join this union. */
export type EmbedderConfig = { kind: 'hashed'; dim?: number };

/** Builds the configured Embedder; the embedder service calls this once at start-up. */
export function createEmbedder(config: EmbedderConfig): Embedder {
  switch (config.kind) {
    case 'hashed':
      return config.dim === undefined ? new HashedEmbedder() : new HashedEmbedder({ dim: config.dim });
    default: {
      // Exhaustiveness: a new kind added to EmbedderConfig without a case fails to compile here.
      const unknownKind: never = config.kind;
      throw new Error(`createEmbedder: unknown embedder kind ${String(unknownKind)}`);
    }
  }
}
