import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { contractEmbedder, describeMemoryStoreContract } from './contract.js';
import { SqliteMemoryStore } from './sqlite.js';

describeMemoryStoreContract('SqliteMemoryStore', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'memory-store-'));
  const store = SqliteMemoryStore.open(join(dir, 'memories.sqlite'), contractEmbedder);
  let k = 0;
  return {
    store,
    fresh: async () => SqliteMemoryStore.open(join(dir, `fresh-${k++}.sqlite`), contractEmbedder),
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
