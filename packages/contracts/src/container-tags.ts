import { z } from 'zod';
import { DocumentStatus, EntityContext } from './common.js';

/** GET /v3/container-tags/{tag} (and the answer to PATCH): the tag's settings and how many documents carry it. */
export const ContainerTagResponse = z.object({
  containerTag: z.string(),
  /** Applies to later documents of the tag that name none of their own. */
  entityContext: z.string().nullable(),
  /** Documents carrying the tag, as the document view has them now. */
  documentCount: z.number().int().nonnegative(),
  statusCounts: z.record(DocumentStatus, z.number().int().nonnegative()),
});
export type ContainerTagResponse = z.infer<typeof ContainerTagResponse>;

/** PATCH /v3/container-tags/{tag}: the tag's settings; `entityContext: null` removes it. */
export const UpdateContainerTagRequest = z
  .object({ entityContext: EntityContext.nullable() })
  .strict();
export type UpdateContainerTagRequest = z.infer<typeof UpdateContainerTagRequest>;

/** DELETE /v3/container-tags/{tag}: the tag's settings and every document carrying it, log history included. */
export const DeleteContainerTagResponse = z.object({
  success: z.boolean(),
  containerTag: z.string(),
  deletedCount: z.number().int().nonnegative(),
  /** Documents kept, and why (a scoped key cannot delete a document that also carries tags outside its scope). */
  errors: z.array(z.object({ id: z.string(), error: z.string() })).optional(),
});
export type DeleteContainerTagResponse = z.infer<typeof DeleteContainerTagResponse>;
