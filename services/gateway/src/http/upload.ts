import { createHash } from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import type { Request, RequestHandler } from 'express';
import multer from 'multer';
import { UPLOADS_PREFIX, blobKey, type BlobStore } from '@memstream/bus';
import { MAX_UPLOAD_BYTES, UploadFileFields } from '@memstream/contracts';
import { AppError, PayloadTooLargeError, RetryableError, ValidationError, errorMessage, newId, type Logger } from '@memstream/kit';
import { submit, type GatewayPorts, type Submission } from '../handlers/documents.js';
import { describeZodError } from './errors.js';
import { scopeOf } from './auth.js';
import { requestLog } from './request-log.js';

const MAX_FIELDS = 20;
const MAX_FIELD_BYTES = 64 * 1024;

/** What the storage engine adds to multer's file: where the bytes went, and their digest, computed on the way. */
interface Stored {
  /** The Object Store key (multer hands `path` back to `_removeFile`). */
  path: string;
  size: number;
  sha256: string;
}

/**
 * A multer StorageEngine that streams the file part into the NATS Object Store as it arrives:
 * the bytes pass through a hashing transform and are never held whole in memory (the Object
 * Store put reads chunk by chunk and awaits each chunk's ack, so a slow broker slows the upload
 * rather than filling the heap).
 */
function objectStoreStorage(blobs: BlobStore, log: Logger): multer.StorageEngine {
  return {
    _handleFile(req, file, cb) {
      const key = UPLOADS_PREFIX + newId();
      const hash = createHash('sha256');
      let size = 0;
      let sourceError: unknown = null;
      const counted = new Transform({
        transform(chunk: Buffer, _enc, done) {
          hash.update(chunk);
          size += chunk.length;
          done(null, chunk);
        },
      });
      // The part failed (over the size limit, or the body broke off): abort the put, which purges
      // the chunks it already wrote, and drain what is left of the part so busboy is not stalled.
      const fail = (err: unknown) => {
        sourceError ??= err;
        file.stream.unpipe(counted);
        counted.destroy(err instanceof Error ? err : new Error(String(err)));
        file.stream.resume();
      };
      // busboy stops the part at the limit and ends it normally; without this the truncated file
      // would be stored whole before multer reported the limit.
      file.stream.once('limit', () => fail(new multer.MulterError('LIMIT_FILE_SIZE', file.fieldname)));
      file.stream.once('error', fail);
      file.stream.pipe(counted);

      blobs.putStream(key, Readable.toWeb(counted)).then(
        async () => {
          if (sourceError) {
            await blobs.delete(key).catch(() => undefined);
            cb(sourceError);
            return;
          }
          const info: Partial<Express.Multer.File> & Stored = { path: key, size, sha256: hash.digest('hex') };
          cb(null, info);
        },
        async (err: unknown) => {
          // Nobody reads the rest of the part now: let it drain instead of stalling the request.
          file.stream.unpipe(counted);
          counted.destroy();
          file.stream.resume();
          // The put purges its own chunks on failure; this covers a put that failed after its metadata landed.
          await blobs.delete(key).catch(() => undefined);
          if (sourceError) {
            cb(sourceError);
            return;
          }
          (req.res ? requestLog(log, req.res) : log).error({ err: errorMessage(err), key }, 'storing an upload failed');
          cb(new RetryableError('Could not store the file: the object store did not accept it; retry shortly'));
        },
      );
    },
    _removeFile(_req, file, cb) {
      blobs.delete(file.path).then(
        () => cb(null),
        (err: unknown) => cb(err instanceof Error ? err : new Error(String(err))),
      );
    },
  };
}

/** A multer or busboy failure as the HTTP error it is: bad input is a 4xx, never a 5xx. */
function uploadError(err: unknown): unknown {
  // Ours, from the storage engine: the broker refused the bytes.
  if (err instanceof AppError) return err;
  if (err instanceof multer.MulterError) {
    const field = err.field ?? 'body';
    switch (err.code) {
      case 'LIMIT_FILE_SIZE':
        return new PayloadTooLargeError('File too large', `file: larger than the limit of ${MAX_UPLOAD_BYTES} bytes (${MAX_UPLOAD_BYTES / 1024 / 1024} MB)`);
      case 'LIMIT_UNEXPECTED_FILE':
        return new ValidationError('Invalid request', `${field}: unexpected file field; send exactly one file, in the field named file`);
      case 'LIMIT_FILE_COUNT':
        return new ValidationError('Invalid request', 'file: only one file per request (limit files: 1)');
      case 'LIMIT_FIELD_COUNT':
        return new ValidationError('Invalid request', `body: too many fields (limit fields: ${MAX_FIELDS})`);
      case 'LIMIT_FIELD_VALUE':
        return new ValidationError('Invalid request', `${field}: value too long (limit fieldSize: ${MAX_FIELD_BYTES} bytes)`);
      case 'LIMIT_FIELD_KEY':
        return new ValidationError('Invalid request', 'body: a field name is too long (limit fieldNameSize: 100 bytes)');
      case 'LIMIT_PART_COUNT':
        return new ValidationError('Invalid request', 'body: too many parts (limit parts)');
      default:
        return new ValidationError('Invalid request', `${field}: ${err.message}`);
    }
  }
  // Everything else multer passes on comes from busboy or the request stream ('Unexpected end of
  // form', 'Malformed part header', 'Multipart: Boundary not found', an aborted request): the
  // body is not well-formed multipart.
  return new ValidationError('Invalid multipart body', `body: ${errorMessage(err)}`);
}

function tagsOf(f: { containerTag?: string | undefined; containerTags?: string[] | undefined }): string[] | undefined {
  if (f.containerTag === undefined && f.containerTags === undefined) return undefined;
  return [...new Set([...(f.containerTag !== undefined ? [f.containerTag] : []), ...(f.containerTags ?? [])])];
}

/** Drop undefined fields, so optional properties stay absent rather than present-and-undefined. */
function defined<T extends object>(o: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as { [K in keyof T]: Exclude<T[K], undefined> };
}

/**
 * POST /v3/documents/file: one file part named `file` plus the text fields of UploadFileFields.
 * The file goes to the Object Store under uploads/<id> while it arrives; the document then
 * points at it (input kind 'blob'). Anything that fails after the bytes were stored deletes them.
 */
export function createUploadHandler(opts: { ports: GatewayPorts; blobs: BlobStore; log: Logger }): RequestHandler {
  const { ports, blobs, log } = opts;
  const parse = multer({
    storage: objectStoreStorage(blobs, log),
    limits: { fileSize: MAX_UPLOAD_BYTES, files: 1, fields: MAX_FIELDS, fieldSize: MAX_FIELD_BYTES },
  }).single('file');

  const parseMultipart = (req: Request, res: Parameters<RequestHandler>[1]) =>
    new Promise<void>((resolve, reject) => {
      parse(req, res, (err?: unknown) => (err ? reject(uploadError(err)) : resolve()));
    });

  return async (req, res) => {
    // multer passes anything that is not multipart through untouched; say so rather than "file is required".
    if (!req.is('multipart/form-data')) {
      throw new ValidationError('Invalid request', 'body: send multipart/form-data with the file in a field named file');
    }
    await parseMultipart(req, res);
    // Set only by our storage engine, which adds path, size and sha256 to what multer knows.
    const file = req.file as (Express.Multer.File & Stored) | undefined;
    if (!file) throw new ValidationError('Invalid request', 'file: required; send the file in a multipart field named file');

    const key = file.path;
    const rlog = requestLog(log, res);
    let keep = false;
    try {
      const parsed = UploadFileFields.safeParse(req.body ?? {});
      if (!parsed.success) throw new ValidationError('Invalid request', describeZodError(parsed.error));
      const f = parsed.data;
      const submission: Submission = {
        customId: f.customId ?? null,
        input: { kind: 'blob', key, filename: file.originalname || null, mimeType: f.mimeType ?? (file.mimetype || null), size: file.size, sha256: file.sha256 },
        contentHash: file.sha256,
        appendable: false,
        ...defined({
          // A scoped key's upload must land inside its container tags; otherwise the stored bytes are deleted below.
          scope: scopeOf(res) ?? undefined,
          containerTags: tagsOf(f),
          metadata: f.metadata,
          entityContext: f.entityContext,
          filterByMetadata: f.filterByMetadata,
          fileType: f.fileType,
          mimeType: f.mimeType,
          filepath: f.filepath,
          taskType: f.taskType,
          dreaming: f.dreaming,
        }),
      };
      const result = await submit(ports, submission, { traceparent: res.locals.traceparent as string });
      // 'queued' means a new revision now names this blob. Anything else is submit saying the
      // content was unchanged: the document keeps its earlier blob and this one is not needed.
      // (An unchanged re-upload while the first is still queued also answers 'queued'; its blob
      // is then kept and owned through a pointer like any other, so deleting the document
      // removes it: harmless, just unused.)
      if (result.status === 'queued') {
        keep = true;
        await writePointer(blobs, rlog, result.id, key);
      }
      rlog.info({ documentId: result.id, status: result.status, size: file.size, key: keep ? key : null }, 'upload accepted');
      res.json({ id: result.id, status: result.status });
    } finally {
      if (!keep) await blobs.delete(key).catch((err: unknown) => rlog.warn({ err: errorMessage(err), key }, 'could not delete an unused upload'));
    }
  };
}

/**
 * doc/<documentId>/uploads/<uploadId> → the upload's key, so deleting the document deletes the
 * upload (uploads are stored before the document id is known, so they cannot live under it).
 * The document is already accepted when this runs: a failure here must not turn into an error
 * answer (a client would retry and, without a customId, create a second document), so it is
 * retried and, failing that, logged with everything needed to remove the blob by hand.
 */
async function writePointer(blobs: BlobStore, log: Logger, documentId: string, key: string): Promise<void> {
  const pointer = blobKey(documentId, 'uploads', key.slice(UPLOADS_PREFIX.length));
  const data = new TextEncoder().encode(key);
  for (let attempt = 1; ; attempt++) {
    try {
      await blobs.put(pointer, data);
      return;
    } catch (err) {
      if (attempt >= 3) {
        log.error({ err: errorMessage(err), documentId, key, pointer }, 'could not record the owner of an upload; deleting the document will leave this blob behind');
        return;
      }
      await new Promise((r) => setTimeout(r, 100 * attempt));
    }
  }
}
