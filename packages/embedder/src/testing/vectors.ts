/** Vector helpers for the embedder tests. */

/** Vectors are unit length, so the dot product is the cosine. */
export function cosine(a: Float32Array | undefined, b: Float32Array | undefined): number {
  if (a === undefined || b === undefined) throw new Error('missing vector');
  let dot = 0;
  for (let i = 0; i < a.length; i++) dot += (a[i] as number) * (b[i] as number);
  return dot;
}

/** The L2 norm. */
export function norm(v: Float32Array): number {
  let s = 0;
  for (const x of v) s += x * x;
  return Math.sqrt(s);
}
