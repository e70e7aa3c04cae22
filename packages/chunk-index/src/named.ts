import path from 'node:path';
import type { ChunkIndex } from './port.js';
import { QdrantChunkIndex } from './qdrant.js';
import { SqliteChunkIndex } from './sqlite.js';

/** Where the chunk index of every process lives: the data dir (SQLite) or a Qdrant server. */
export interface IndexStoreOptions {
  dataDir: string;
  qdrantUrl?: string | undefined;
  qdrantApiKey?: string | undefined;
}

/**
 * One embedding model's chunk index, by name: `default` is index.sqlite (Qdrant: the
 * `memstream_chunks` collections), any other name index.<name>.sqlite (Qdrant:
 * `memstream_chunks_<name>`). A model switch builds its vectors in a new name, a shadow of the
 * live index, and the switch is a change of which name is active.
 */
export function openNamedChunkIndex(opts: IndexStoreOptions, name: string): Promise<ChunkIndex> {
  if (!/^[a-z0-9_-]{1,80}$/.test(name)) throw new Error(`invalid chunk index name: ${name}`);
  if (opts.qdrantUrl) {
    return QdrantChunkIndex.connect(opts.qdrantUrl, {
      apiKey: opts.qdrantApiKey,
      collection: name === 'default' ? 'memstream_chunks' : `memstream_chunks_${name}`,
    });
  }
  return Promise.resolve(SqliteChunkIndex.open(namedIndexPath(opts.dataDir, name)));
}

/** The SQLite file of a named index. */
export function namedIndexPath(dataDir: string, name: string): string {
  return path.join(dataDir, name === 'default' ? 'index.sqlite' : `index.${name}.sqlite`);
}

/** Named indexes opened once each and shared, closed together. */
export class ChunkIndexSet {
  private readonly open = new Map<string, Promise<ChunkIndex>>();
  constructor(private readonly opts: IndexStoreOptions) {}

  get(name: string): Promise<ChunkIndex> {
    let p = this.open.get(name);
    if (!p) {
      p = openNamedChunkIndex(this.opts, name);
      this.open.set(name, p);
      p.catch(() => this.open.delete(name));
    }
    return p;
  }

  async close(): Promise<void> {
    const all = [...this.open.values()];
    this.open.clear();
    await Promise.allSettled(all.map(async (p) => (await p).close()));
  }
}
