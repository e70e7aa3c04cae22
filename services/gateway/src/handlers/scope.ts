import { NotFoundError, PermissionError, ValidationError } from '@memstream/kit';

/**
 * The container tags a caller may reach: `null` for the admin key (every tag, and documents
 * without tags), or a scoped key's tags.
 *
 * The rules, for a scoped key with tags S:
 * - it **sees** a document that carries at least one tag of S (the same "any of" rule as a
 *   containerTags filter in list and search); any other document is 404 to it, as if absent;
 * - it **changes** (PATCH, DELETE, re-add by customId) only a document whose tags are all in S:
 *   a document it sees but that also carries a tag outside S is 403, since changing it would
 *   change another tenant's data;
 * - every tag it writes must be in S (else 403); a write that names no tag gets S's tag when S
 *   has exactly one, and is refused with 400 when S has several (the key must say which);
 * - list, search and processing are limited to S when the request names no tag; naming a tag
 *   outside S is 403.
 */
export type TagScope = readonly string[] | null;

/**
 * Who is calling, set on `res.locals.principal` by `authenticate` (http/auth.ts) for every route
 * after it: the admin key (MEMSTREAM_API_KEY), or a scoped key limited to its container tags.
 */
export type Principal = { kind: 'admin' } | { kind: 'scoped'; keyId: string; containerTags: string[] };

/** The container tags a principal may reach: null for the admin key. */
export function tagScope(p: Principal): TagScope {
  return p.kind === 'admin' ? null : p.containerTags;
}

/** May the caller see a document with these tags? */
export function canSee(scope: TagScope, docTags: readonly string[]): boolean {
  return scope === null || docTags.some((t) => scope.includes(t));
}

/** May the caller change a document with these tags? */
export function owns(scope: TagScope, docTags: readonly string[]): boolean {
  return scope === null || (docTags.length > 0 && docTags.every((t) => scope.includes(t)));
}

function describe(scope: readonly string[]): string {
  return scope.map((t) => JSON.stringify(t)).join(', ');
}

/** 403 unless every tag is in scope. `field` names the request field, for the details. */
export function assertTagsInScope(scope: TagScope, tags: readonly string[], field = 'containerTags'): void {
  if (scope === null) return;
  const outside = tags.filter((t) => !scope.includes(t));
  if (outside.length > 0) {
    throw new PermissionError('Forbidden', `${field}: ${describe(outside)} ${outside.length === 1 ? 'is' : 'are'} outside this API key's container tags (${describe(scope)})`);
  }
}

/** The tags a read (list, search, processing) is limited to: those named, if all in scope; else the whole scope. */
export function readTags(scope: TagScope, named: string[] | undefined, field = 'containerTags'): string[] | undefined {
  if (scope === null) return named;
  if (named === undefined || named.length === 0) return [...scope];
  assertTagsInScope(scope, named, field);
  return named;
}

/**
 * The tags a write by a scoped key ends up with: `tags` (given, or the document's), or, when
 * empty, the key's only tag. A multi-tag key must name one: 400.
 */
export function writeTags(scope: readonly string[], tags: string[]): string[] {
  if (tags.length === 0) {
    if (scope.length === 1) return [scope[0]!];
    throw new ValidationError('containerTag required', `containerTag: this API key is scoped to several container tags (${describe(scope)}); name the one to write to`);
  }
  assertTagsInScope(scope, tags);
  return tags;
}

/** 404 unless the caller sees the document; 403 when it sees it but may not change it. */
export function assertOwns(scope: TagScope, docTags: readonly string[], idOrCustomId: string): void {
  if (scope === null) return;
  if (!canSee(scope, docTags)) throw new NotFoundError('Document not found', `no document with id or customId ${JSON.stringify(idOrCustomId)}`);
  if (!owns(scope, docTags)) {
    throw new PermissionError('Forbidden', `document ${JSON.stringify(idOrCustomId)} also belongs to container tags outside this API key's (${describe(scope)}); only a key covering all its tags may change it`);
  }
}

/**
 * The namespace a caller's customIds live in: a document's id is derived from (namespace,
 * customId), so two tenants using the same customId get two documents and can never see, claim
 * or block each other's. The admin key has one namespace of its own ('default', the one every
 * customId had before scoping); a scoped key's is its set of container tags, so every key with
 * the same tags shares one.
 */
export function customIdNamespace(scope: TagScope): string {
  return scope === null ? 'default' : `tags:${JSON.stringify([...new Set(scope)].sort())}`;
}
