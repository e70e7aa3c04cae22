/** Turns texts into vectors of one model. Vectors are L2-normalised, so cosine = dot product. */
export interface Embedder {
  /** A stable name: the index records it with every vector so two models are never mixed. */
  readonly model: string;
  readonly dim: number;
  embed(texts: string[]): Promise<Float32Array[]>;
}
