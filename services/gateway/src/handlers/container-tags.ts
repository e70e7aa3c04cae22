import {
  ContainerTag,
  DOCUMENT_STATUSES,
  UpdateContainerTagRequest,
  type ContainerTagResponse,
  type DeleteContainerTagResponse,
  type DocumentStatus,
} from '@memstream/contracts';
import { ValidationError } from '@memstream/kit';
import { deleteBySelector, type GatewayPorts } from './documents.js';
import { assertTagsInScope, type TagScope } from './scope.js';

/** The tag in the path, validated like a tag in a body; a scoped key reaches only its own tags (403). */
function tagOf(raw: string, scope: TagScope): string {
  const parsed = ContainerTag.safeParse(raw);
  if (!parsed.success) throw new ValidationError('Invalid containerTag', `containerTag: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  assertTagsInScope(scope, [parsed.data], 'containerTag');
  return parsed.data;
}

/** GET /v3/container-tags/{tag} */
export async function getContainerTag(ports: GatewayPorts, rawTag: string, scope: TagScope): Promise<ContainerTagResponse> {
  const tag = tagOf(rawTag, scope);
  const counts = await Promise.all(
    DOCUMENT_STATUSES.map(async (status) => {
      const { total } = await ports.views.list({ containerTags: [tag], statuses: [status], sort: 'createdAt', order: 'asc', limit: 1, offset: 0 });
      return [status, total] as const;
    }),
  );
  const statusCounts = Object.fromEntries(counts) as Record<DocumentStatus, number>;
  return {
    containerTag: tag,
    entityContext: await ports.tagContexts.get(tag),
    documentCount: counts.reduce((n, [, c]) => n + c, 0),
    statusCounts,
  };
}

/** PATCH /v3/container-tags/{tag}: its settings (entityContext, for later documents of the tag). */
export async function updateContainerTag(ports: GatewayPorts, rawTag: string, body: unknown, scope: TagScope): Promise<ContainerTagResponse> {
  const tag = tagOf(rawTag, scope);
  const req = UpdateContainerTagRequest.parse(body ?? {});
  if (req.entityContext === null) await ports.tagContexts.delete(tag);
  else await ports.tagContexts.set(tag, req.entityContext);
  return getContainerTag(ports, tag, scope);
}

/**
 * DELETE /v3/container-tags/{tag}: every document carrying the tag (those not projected yet
 * included; each with a tombstone, its history purged, its chunks and blobs removed), then the
 * tag's settings. A scoped key keeps, and is told about, documents that also carry tags outside
 * its scope.
 */
export async function deleteContainerTag(ports: GatewayPorts, rawTag: string, scope: TagScope, headers: Record<string, string> = {}): Promise<DeleteContainerTagResponse> {
  const tag = tagOf(rawTag, scope);
  const { deletedCount, errors } = await deleteBySelector(ports, { containerTags: [tag] }, scope, headers);
  await ports.tagContexts.delete(tag);
  return { success: errors.length === 0, containerTag: tag, deletedCount, ...(errors.length > 0 ? { errors } : {}) };
}
