import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeDocumentViewsContract } from './contract.js';
import { SqliteDocumentViews } from './sqlite.js';
import type { DocumentViews } from './port.js';

describeDocumentViewsContract('SqliteDocumentViews', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'memstream-views-'));
  const path = join(dir, 'views.sqlite');
  let views: SqliteDocumentViews;
  try {
    views = SqliteDocumentViews.open(path);
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const opened: DocumentViews[] = [views];
  return {
    views,
    reopen: async () => {
      const another = SqliteDocumentViews.open(path);
      opened.push(another);
      return another;
    },
    cleanup: async () => {
      for (const v of opened) await v.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});
