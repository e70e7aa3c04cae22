/** Turns texts into vectors of one model. Vectors are L2-normalised, so cosine = dot product. */
export interface Embedder {
  /** A stable name: the index records it with every vector so two models are never mixed. */
  readonly model: string;
  readonly dim: number;
  /**
   * How hybrid search should weigh this model's cosines against keyword scores, when the model
   * knows better than the index's default (chosen with `bench retrieval --sweep`, docs/search.md):
   * the dense weight, and the floor — the cosine unrelated texts get from this model.
   */
  readonly fusion?: { denseWeight: number; denseFloor: number };
  embed(texts: string[]): Promise<Float32Array[]>;
}
