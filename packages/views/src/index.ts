import { MongoDocumentViews } from './mongo.js';
import { SqliteDocumentViews } from './sqlite.js';
import type { DocumentViews } from './port.js';

export type { DocumentView, DocumentViews, ListQuery, ListSelection, ViewWrite } from './port.js';
export { SqliteDocumentViews } from './sqlite.js';
export { MongoDocumentViews, filterToMongo } from './mongo.js';
// The projection's reducer lives beside the port it produces records for; its consumers import it from here.
export * from './evolve.js';

/** Open the configured view store: MongoDB when `mongodbUrl` is set, otherwise the SQLite file at `sqlitePath`. */
export async function openDocumentViews(opts: { mongodbUrl?: string; sqlitePath: string }): Promise<DocumentViews> {
  if (opts.mongodbUrl) return MongoDocumentViews.connect(opts.mongodbUrl);
  return SqliteDocumentViews.open(opts.sqlitePath);
}
