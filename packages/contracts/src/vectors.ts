/** Vectors cross the wire as base64 of little-endian float32, so no precision is lost in JSON. */
export function encodeVector(v: Float32Array | number[]): string {
  const f = v instanceof Float32Array ? v : Float32Array.from(v);
  return Buffer.from(f.buffer, f.byteOffset, f.byteLength).toString('base64');
}

export function decodeVector(s: string): Float32Array {
  const b = Buffer.from(s, 'base64');
  // Copy into an aligned buffer: Buffer pools may hand out unaligned offsets.
  const out = new Float32Array(b.byteLength / 4);
  new Uint8Array(out.buffer).set(b);
  return out;
}
