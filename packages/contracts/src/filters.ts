import { z } from 'zod';

/**
 * The metadata filter language of list and search, in the official SDK's shape:
 * `{ AND: [...] }` or `{ OR: [...] }`, nestable, whose leaves are conditions.
 * Store adapters translate the normalised form (`FilterExpr`) into their own query language,
 * so a filter is pushed down into the view store and the index rather than applied after.
 */

const boolish = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]);

export const FilterCondition = z
  .object({
    key: z.string().min(1, 'filter key must not be empty').max(256),
    value: z.union([z.string(), z.number(), z.boolean()]).transform((v) => String(v)),
    filterType: z.enum(['metadata', 'numeric', 'array_contains', 'string_contains']).default('metadata'),
    ignoreCase: boolish.default(false),
    negate: boolish.default(false),
    numericOperator: z.enum(['>', '<', '>=', '<=', '=']).default('='),
  })
  .strict();
export type FilterCondition = z.infer<typeof FilterCondition>;

export type FilterInput = { AND: FilterNodeInput[] } | { OR: FilterNodeInput[] };
type FilterNodeInput = FilterInput | z.input<typeof FilterCondition>;

export type FilterExpr =
  | { op: 'and'; items: FilterExpr[] }
  | { op: 'or'; items: FilterExpr[] }
  | ({ op: 'cond' } & FilterCondition);

const MAX_DEPTH = 8;

export const FilterNode: z.ZodType<FilterExpr, unknown> = z.lazy(() =>
  z.union([
    z.object({ AND: z.array(FilterNode).max(100) }).strict().transform((v): FilterExpr => ({ op: 'and', items: v.AND })),
    z.object({ OR: z.array(FilterNode).max(100) }).strict().transform((v): FilterExpr => ({ op: 'or', items: v.OR })),
    FilterCondition.transform((c): FilterExpr => ({ op: 'cond', ...c })),
  ]),
);

function depth(e: FilterExpr): number {
  return e.op === 'cond' ? 0 : 1 + Math.max(0, ...e.items.map(depth));
}

export const MAX_FILTER_CONDITIONS = 200;

/**
 * Depth and size of a JSON value, counted without recursion: a hostile body nested thousands of
 * levels deep must be refused with a 400, not overflow the stack of a recursive validator.
 */
function shape(v: unknown): { depth: number; nodes: number } {
  let depth = 0;
  let nodes = 0;
  const stack: Array<[unknown, number]> = [[v, 1]];
  while (stack.length) {
    const [x, d] = stack.pop()!;
    nodes++;
    if (d > depth) depth = d;
    if (depth > 64 || nodes > 10 * MAX_FILTER_CONDITIONS) break;
    if (x && typeof x === 'object') for (const c of Object.values(x)) if (c && typeof c === 'object') stack.push([c, d + 1]);
  }
  return { depth, nodes };
}

/** A top-level filter: an AND or OR group (given as an object or as a JSON string). */
export const Filters = z
  .union([z.string(), z.record(z.string(), z.unknown())])
  .transform((v, ctx) => {
    if (typeof v !== 'string') return v;
    try {
      return JSON.parse(v) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'filters is not valid JSON' });
      return z.NEVER;
    }
  })
  .superRefine((v, ctx) => {
    const { depth, nodes } = shape(v);
    // Each level of AND/OR is two JSON levels (the object and its array).
    if (depth > 2 * MAX_DEPTH + 2) ctx.addIssue({ code: 'custom', message: `filters may nest at most ${MAX_DEPTH} levels` });
    else if (nodes > 4 * MAX_FILTER_CONDITIONS) ctx.addIssue({ code: 'custom', message: `filters may hold at most ${MAX_FILTER_CONDITIONS} conditions` });
  })
  .pipe(
    z.union([
      z.object({ AND: z.array(FilterNode).max(100) }).strict().transform((v): FilterExpr => ({ op: 'and', items: v.AND })),
      z.object({ OR: z.array(FilterNode).max(100) }).strict().transform((v): FilterExpr => ({ op: 'or', items: v.OR })),
    ]),
  )
  .refine((e) => depth(e) <= MAX_DEPTH, `filters may nest at most ${MAX_DEPTH} levels`);

/** Evaluate a filter against flat metadata: the reference semantics every adapter must match. */
export function matchesFilter(metadata: Record<string, unknown>, e: FilterExpr): boolean {
  if (e.op === 'and') return e.items.every((i) => matchesFilter(metadata, i));
  if (e.op === 'or') return e.items.some((i) => matchesFilter(metadata, i));
  const hit = matchCondition(metadata[e.key], e);
  return e.negate ? !hit : hit;
}

function norm(s: string, ignoreCase: boolean): string {
  return ignoreCase ? s.toLowerCase() : s;
}

function matchCondition(v: unknown, c: FilterCondition): boolean {
  if (v === undefined || v === null) return false;
  switch (c.filterType) {
    case 'numeric': {
      const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
      const target = Number(c.value);
      if (Number.isNaN(n) || Number.isNaN(target)) return false;
      switch (c.numericOperator) {
        case '>': return n > target;
        case '<': return n < target;
        case '>=': return n >= target;
        case '<=': return n <= target;
        case '=': return n === target;
      }
      return false;
    }
    case 'array_contains':
      return Array.isArray(v) && v.some((x) => norm(String(x), c.ignoreCase) === norm(c.value, c.ignoreCase));
    case 'string_contains':
      return typeof v === 'string' && norm(v, c.ignoreCase).includes(norm(c.value, c.ignoreCase));
    case 'metadata':
      if (Array.isArray(v)) return v.some((x) => norm(String(x), c.ignoreCase) === norm(c.value, c.ignoreCase));
      return norm(String(v), c.ignoreCase) === norm(c.value, c.ignoreCase);
  }
}
