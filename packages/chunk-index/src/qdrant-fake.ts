import type { QdrantClient, Schemas } from '@qdrant/js-client-rest';

/*
 * An in-memory stand-in for the part of the Qdrant REST API that QdrantChunkIndex uses, for
 * tests on machines where no Qdrant server can run. It models Qdrant's documented semantics
 * (filters, cosine and sparse-IDF scoring, RRF as 1/(k + position from 0)) and rejects requests
 * a server would reject for the reasons most likely to matter here: unknown collections, unknown
 * vector names, wrong dimensions, duplicate sparse indices, filter shapes outside the subset the
 * translator emits. It is not a proof of server behaviour: qdrant.contract.test.ts against a
 * real server (QDRANT_URL) is.
 */

type QCondition = Schemas['Condition'];
type QFilter = Schemas['Filter'];
type PointId = string | number;

interface FakePoint {
  id: PointId;
  dense: Map<string, number[]>;
  sparse: Map<string, Map<number, number>>;
  payload: Record<string, unknown>;
}

interface FakeCollection {
  dense: Map<string, { size: number; distance: string }>;
  sparse: Map<string, { idf: boolean }>;
  points: Map<string, FakePoint>;
  indexes: Set<string>;
}

class FakeApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Evaluate a Qdrant condition over a payload: a field condition holds when any value at the key
 * (arrays element-wise) satisfies it and never for a missing key; `must` needs all, `should` at
 * least one, `must_not` none.
 */
export function qdrantConditionMatches(payload: Record<string, unknown>, c: QCondition, id?: PointId): boolean {
  if ('key' in c) {
    const raw = c.key
      .split('.')
      .reduce<unknown>((o, k) => (o && typeof o === 'object' && !Array.isArray(o) ? (o as Record<string, unknown>)[k] : undefined), payload);
    if (raw === undefined || raw === null) return false;
    const values = Array.isArray(raw) ? raw : [raw];
    const match = c.match as { value?: unknown; any?: unknown[] } | null | undefined;
    if (match && 'value' in match) return values.some((v) => v === match.value);
    if (match?.any) return values.some((v) => match.any!.includes(v));
    if (c.range) {
      const r = c.range as Schemas['Range'];
      return values.some(
        (v) =>
          typeof v === 'number' &&
          (r.gt == null || v > r.gt) &&
          (r.gte == null || v >= r.gte) &&
          (r.lt == null || v < r.lt) &&
          (r.lte == null || v <= r.lte),
      );
    }
    throw new FakeApiError(400, `unsupported field condition ${JSON.stringify(c)}`);
  }
  if ('has_id' in c) return id !== undefined && c.has_id.map(String).includes(String(id));
  if ('is_empty' in c || 'is_null' in c || 'nested' in c || 'has_vector' in c) {
    throw new FakeApiError(400, `unsupported condition ${JSON.stringify(c)}`);
  }
  return filterMatches(payload, c, id);
}

function list(x: unknown): QCondition[] {
  return x == null ? [] : Array.isArray(x) ? (x as QCondition[]) : [x as QCondition];
}

function filterMatches(payload: Record<string, unknown>, f: QFilter | null | undefined, id?: PointId): boolean {
  if (!f) return true;
  const extra = Object.keys(f).filter((k) => !['must', 'should', 'must_not'].includes(k));
  if (extra.length) throw new FakeApiError(400, `unsupported filter keys ${extra.join(',')}`);
  const should = list(f.should);
  return (
    list(f.must).every((c) => qdrantConditionMatches(payload, c, id)) &&
    (should.length === 0 || should.some((c) => qdrantConditionMatches(payload, c, id))) &&
    list(f.must_not).every((c) => !qdrantConditionMatches(payload, c, id))
  );
}

function clone<T>(x: T): T {
  return JSON.parse(JSON.stringify(x)) as T;
}

function isUuidOrInt(id: unknown): id is PointId {
  if (typeof id === 'number') return Number.isInteger(id) && id >= 0;
  return typeof id === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id);
}

/** The in-memory fake; `asClient()` gives it QdrantClient's type for the methods the adapter calls. */
export class FakeQdrant {
  readonly collections = new Map<string, FakeCollection>();
  /** Every method call, for tests that want to inspect requests. */
  readonly calls: { method: string; collection?: string; args?: unknown }[] = [];

  asClient(): QdrantClient {
    return this as unknown as QdrantClient;
  }

  private get(name: string): FakeCollection {
    const c = this.collections.get(name);
    if (!c) throw new FakeApiError(404, `Collection \`${name}\` doesn't exist!`);
    return c;
  }

  async versionInfo(): Promise<{ title: string; version: string }> {
    this.calls.push({ method: 'versionInfo' });
    return { title: 'fake qdrant', version: '1.16.0' };
  }

  async getCollections(): Promise<{ collections: { name: string }[] }> {
    this.calls.push({ method: 'getCollections' });
    return { collections: [...this.collections.keys()].map((name) => ({ name })) };
  }

  async collectionExists(name: string): Promise<{ exists: boolean }> {
    this.calls.push({ method: 'collectionExists', collection: name });
    return { exists: this.collections.has(name) };
  }

  async createCollection(
    name: string,
    args: { vectors?: Record<string, { size: number; distance: string }>; sparse_vectors?: Record<string, { modifier?: string }> },
  ): Promise<boolean> {
    this.calls.push({ method: 'createCollection', collection: name, args });
    if (!/^[A-Za-z0-9_-]{1,255}$/.test(name)) throw new FakeApiError(400, `bad collection name ${name}`);
    if (this.collections.has(name)) throw new FakeApiError(409, `Collection \`${name}\` already exists!`);
    const dense = new Map<string, { size: number; distance: string }>();
    for (const [k, v] of Object.entries(args.vectors ?? {})) {
      if (!('size' in v) || !['Cosine', 'Dot', 'Euclid', 'Manhattan'].includes(v.distance)) throw new FakeApiError(400, 'bad vector params');
      dense.set(k, v);
    }
    const sparse = new Map<string, { idf: boolean }>();
    for (const [k, v] of Object.entries(args.sparse_vectors ?? {})) sparse.set(k, { idf: v.modifier === 'idf' });
    this.collections.set(name, { dense, sparse, points: new Map(), indexes: new Set() });
    return true;
  }

  async deleteCollection(name: string): Promise<boolean> {
    this.calls.push({ method: 'deleteCollection', collection: name });
    return this.collections.delete(name);
  }

  async createPayloadIndex(name: string, args: { field_name: string; field_schema: string }): Promise<unknown> {
    this.calls.push({ method: 'createPayloadIndex', collection: name, args });
    if (!['keyword', 'integer', 'float', 'bool', 'text', 'uuid', 'datetime', 'geo'].includes(args.field_schema)) {
      throw new FakeApiError(400, `bad schema ${args.field_schema}`);
    }
    this.get(name).indexes.add(args.field_name);
    return { status: 'completed' };
  }

  async upsert(
    name: string,
    args: {
      points: { id: PointId; vector: Record<string, unknown>; payload?: Record<string, unknown> | null }[];
      update_filter?: QFilter | null;
    },
  ): Promise<unknown> {
    this.calls.push({ method: 'upsert', collection: name, args });
    const c = this.get(name);
    // Validate every point before applying any, as the server rejects a bad batch whole.
    const prepared: FakePoint[] = args.points.map((p) => {
      if (!isUuidOrInt(p.id)) throw new FakeApiError(400, `bad point id ${String(p.id)}`);
      const dense = new Map<string, number[]>();
      const sparse = new Map<string, Map<number, number>>();
      for (const [k, v] of Object.entries(p.vector)) {
        const dc = c.dense.get(k);
        const sc = c.sparse.get(k);
        if (dc) {
          if (!Array.isArray(v) || v.length !== dc.size || !v.every((x) => typeof x === 'number' && Number.isFinite(x))) {
            throw new FakeApiError(400, `wrong vector dimension for ${k}`);
          }
          dense.set(k, v as number[]);
        } else if (sc) {
          const s = v as { indices: number[]; values: number[] };
          if (s.indices.length !== s.values.length || new Set(s.indices).size !== s.indices.length) {
            throw new FakeApiError(400, 'bad sparse vector');
          }
          if (!s.indices.every((i) => Number.isInteger(i) && i >= 0 && i <= 0xffffffff)) throw new FakeApiError(400, 'sparse index out of u32');
          sparse.set(k, new Map(s.indices.map((i, j) => [i, s.values[j]!])));
        } else {
          throw new FakeApiError(400, `Not existing vector name error: ${k}`);
        }
      }
      if (dense.size !== c.dense.size) throw new FakeApiError(400, 'missing dense vector');
      return { id: p.id, dense, sparse, payload: clone(p.payload ?? {}) };
    });
    // Conditional update (Qdrant 1.16): an existing point is replaced only when it matches
    // update_filter; a new point is inserted regardless.
    for (const p of prepared) {
      const old = c.points.get(String(p.id));
      if (old && args.update_filter && !filterMatches(old.payload, args.update_filter, old.id)) continue;
      c.points.set(String(p.id), p);
    }
    return { status: 'completed' };
  }

  async retrieve(name: string, args: { ids: PointId[]; with_payload?: boolean }): Promise<{ id: PointId; payload?: Record<string, unknown> }[]> {
    this.calls.push({ method: 'retrieve', collection: name, args });
    const c = this.get(name);
    return args.ids.flatMap((id) => {
      const p = c.points.get(String(id));
      return p ? [{ id: p.id, ...(args.with_payload ? { payload: clone(p.payload) } : {}) }] : [];
    });
  }

  private select(c: FakeCollection, selector: { points?: PointId[]; filter?: QFilter }): FakePoint[] {
    if (selector.points) return selector.points.flatMap((id) => c.points.get(String(id)) ?? []);
    if (selector.filter) return [...c.points.values()].filter((p) => filterMatches(p.payload, selector.filter, p.id));
    throw new FakeApiError(400, 'points or filter required');
  }

  async scroll(
    name: string,
    args: {
      filter?: QFilter;
      limit?: number;
      offset?: PointId;
      with_payload?: boolean;
      order_by?: { key: string; direction?: 'asc' | 'desc' } | string;
    },
  ): Promise<{ points: { id: PointId; payload?: Record<string, unknown> }[]; next_page_offset?: PointId | null }> {
    this.calls.push({ method: 'scroll', collection: name, args });
    const c = this.get(name);
    if (args.order_by !== undefined) {
      // Ordered scroll: by a numeric payload field with a range index; no offset paging (as in Qdrant).
      const by = typeof args.order_by === 'string' ? { key: args.order_by, direction: 'asc' as const } : args.order_by;
      if (!c.indexes.has(by.key)) throw new FakeApiError(400, `No range index for \`order_by\` key: ${by.key}`);
      if (args.offset !== undefined) throw new FakeApiError(400, 'offset is not supported with order_by');
      const sign = by.direction === 'desc' ? -1 : 1;
      const ordered = [...c.points.values()]
        .filter((p) => filterMatches(p.payload, args.filter, p.id) && typeof p.payload[by.key] === 'number')
        .sort((a, b) => sign * ((a.payload[by.key] as number) - (b.payload[by.key] as number)));
      return {
        points: ordered.slice(0, args.limit ?? 10).map((p) => ({ id: p.id, ...(args.with_payload ? { payload: clone(p.payload) } : {}) })),
        next_page_offset: null,
      };
    }
    // Scroll order is by point id, as in Qdrant.
    const all = [...c.points.values()]
      .filter((p) => filterMatches(p.payload, args.filter, p.id))
      .sort((a, b) => (String(a.id) < String(b.id) ? -1 : String(a.id) > String(b.id) ? 1 : 0));
    const start = args.offset === undefined ? 0 : all.findIndex((p) => String(p.id) >= String(args.offset));
    const limit = args.limit ?? 10;
    const page = start < 0 ? [] : all.slice(start, start + limit);
    const next = start < 0 ? undefined : all[start + limit];
    return {
      points: page.map((p) => ({ id: p.id, ...(args.with_payload ? { payload: clone(p.payload) } : {}) })),
      next_page_offset: next ? next.id : null,
    };
  }

  async count(name: string, args: { filter?: QFilter } = {}): Promise<{ count: number }> {
    this.calls.push({ method: 'count', collection: name, args });
    const c = this.get(name);
    return { count: [...c.points.values()].filter((p) => filterMatches(p.payload, args.filter, p.id)).length };
  }

  async delete(name: string, args: { points?: PointId[]; filter?: QFilter }): Promise<unknown> {
    this.calls.push({ method: 'delete', collection: name, args });
    const c = this.get(name);
    for (const p of this.select(c, args)) c.points.delete(String(p.id));
    return { status: 'completed' };
  }

  async setPayload(name: string, args: { payload: Record<string, unknown>; points?: PointId[]; filter?: QFilter }): Promise<unknown> {
    this.calls.push({ method: 'setPayload', collection: name, args });
    const c = this.get(name);
    // set_payload overwrites the given top-level keys and keeps the others.
    for (const p of this.select(c, args)) Object.assign(p.payload, clone(args.payload));
    return { status: 'completed' };
  }

  async query(
    name: string,
    args: {
      prefetch?: { query?: unknown; using?: string; filter?: QFilter; limit?: number }[];
      query?: unknown;
      using?: string;
      filter?: QFilter;
      limit?: number;
      offset?: number;
      with_payload?: boolean;
    },
  ): Promise<{ points: { id: PointId; version: number; score: number; payload?: Record<string, unknown> }[] }> {
    this.calls.push({ method: 'query', collection: name, args });
    const c = this.get(name);
    let ranked: { p: FakePoint; score: number }[];
    if (args.prefetch) {
      const rrf = (args.query as { rrf?: { k?: number } } | undefined)?.rrf;
      if (!rrf) throw new FakeApiError(400, 'only rrf fusion is modelled');
      const k = rrf.k ?? 2;
      const fused = new Map<string, { p: FakePoint; score: number }>();
      for (const pf of args.prefetch) {
        const lst = this.search(c, pf.query, pf.using, pf.filter).slice(0, pf.limit ?? 10);
        lst.forEach((x, pos) => {
          const prev = fused.get(String(x.p.id));
          const add = 1 / (pos + k);
          if (prev) prev.score += add;
          else fused.set(String(x.p.id), { p: x.p, score: add });
        });
      }
      ranked = [...fused.values()].filter((x) => filterMatches(x.p.payload, args.filter, x.p.id)).sort((a, b) => b.score - a.score);
    } else {
      ranked = this.search(c, args.query, args.using, args.filter);
    }
    const offset = args.offset ?? 0;
    return {
      points: ranked.slice(offset, offset + (args.limit ?? 10)).map((x) => ({
        id: x.p.id,
        version: 0,
        // Qdrant reports scores as f32.
        score: Math.fround(x.score),
        ...(args.with_payload ? { payload: clone(x.p.payload) } : {}),
      })),
    };
  }

  private search(c: FakeCollection, query: unknown, using: string | undefined, filter: QFilter | undefined): { p: FakePoint; score: number }[] {
    if (using === undefined) throw new FakeApiError(400, 'named vectors need `using`');
    const candidates = [...c.points.values()].filter((p) => filterMatches(p.payload, filter, p.id));
    const dc = c.dense.get(using);
    if (dc) {
      if (!Array.isArray(query) || query.length !== dc.size) throw new FakeApiError(400, 'wrong query dimension');
      const q = query as number[];
      const qn = Math.sqrt(q.reduce((s, x) => s + x * x, 0));
      return candidates
        .map((p) => {
          const v = p.dense.get(using)!;
          const vn = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
          return { p, score: v.reduce((s, x, i) => s + x * q[i]!, 0) / (qn * vn) };
        })
        .sort((a, b) => b.score - a.score);
    }
    const sc = c.sparse.get(using);
    if (sc) {
      const s = query as { indices: number[]; values: number[] };
      if (!Array.isArray(s?.indices) || new Set(s.indices).size !== s.indices.length) throw new FakeApiError(400, 'bad sparse query');
      const all = [...c.points.values()];
      const idf = (i: number): number => {
        if (!sc.idf) return 1;
        const n = all.filter((p) => p.sparse.get(using)?.has(i)).length;
        return Math.log(1 + (all.length - n + 0.5) / (n + 0.5));
      };
      const out: { p: FakePoint; score: number }[] = [];
      for (const p of candidates) {
        const v = p.sparse.get(using);
        if (!v) continue;
        let score = 0;
        let overlap = false;
        s.indices.forEach((i, j) => {
          const d = v.get(i);
          if (d !== undefined) {
            overlap = true;
            score += s.values[j]! * d * idf(i);
          }
        });
        if (overlap) out.push({ p, score });
      }
      return out.sort((a, b) => b.score - a.score);
    }
    throw new FakeApiError(400, `Not existing vector name error: ${using}`);
  }
}
