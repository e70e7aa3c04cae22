import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { asHandler, follow, recordingContext, submittedEvent } from '@memstream/bus';
import { SqliteChunkIndex } from '@memstream/chunk-index';
import { encodeVector } from '@memstream/contracts';
import { createIndexHandler, type IndexerPorts } from './index.js';

describe('indexer: a failed revision is never indexed', () => {
  let dir: string;
  let index: SqliteChunkIndex;
  afterEach(async () => {
    await index?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function embeddedFor(revision: number) {
    const sub = submittedEvent('a very long word', { revision });
    return follow(sub, 'document.embedded.v1', {
      model: 'hashed',
      dim: 4,
      computed: 1,
      chunks: [{ index: 0, hash: 'h0', text: 'a very long word', tokens: 4, vector: encodeVector([1, 0, 0, 0]) }],
    });
  }

  function ports(failedRevision: number, latestRevision?: number): IndexerPorts {
    return {
      index,
      // The log's newest submission is the event's own revision unless a test says otherwise.
      documentState: async () => ({ revision: latestRevision ?? 0, scope: { containerTags: ['t'], metadata: {} }, failedRevision }),
      endedSince: async (_id: string, revision: number) => failedRevision >= revision,
    };
  }

  it('given the revision failed (the chunker timed out and the document was failed), when its late chunks arrive, then nothing is indexed or emitted', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'indexer-unit-'));
    index = SqliteChunkIndex.open(path.join(dir, 'index.sqlite'));
    const late = embeddedFor(1);
    const ctx = recordingContext();
    const out = await asHandler(createIndexHandler(ports(1, 1)))(late, ctx);
    expect(out ?? []).toEqual([]);
    expect(await index.getDocumentChunks(late.documentId)).toEqual([]);
  });

  it('a revision that did not fail is indexed as before', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'indexer-unit-'));
    index = SqliteChunkIndex.open(path.join(dir, 'index.sqlite'));
    const ev = embeddedFor(2);
    const out = await asHandler(createIndexHandler(ports(1, 2)))(ev, recordingContext());
    expect((out ?? []).map((e) => e.type)).toEqual(['document.indexed.v1']);
    expect(await index.getDocumentChunks(ev.documentId)).toHaveLength(1);
  });

  it('a stale revision, or one of a deleted document, is not indexed: the state read for its tags says so', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'indexer-unit-'));
    index = SqliteChunkIndex.open(path.join(dir, 'index.sqlite'));
    const ev = embeddedFor(2);
    for (const latest of [3, 0]) {
      const out = await asHandler(createIndexHandler(ports(0, latest)))(ev, recordingContext());
      expect(out ?? []).toEqual([]);
    }
    expect(await index.getDocumentChunks(ev.documentId)).toEqual([]);
  });

  it('deleted while it was written: the chunks are removed again and nothing is emitted', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'indexer-unit-'));
    index = SqliteChunkIndex.open(path.join(dir, 'index.sqlite'));
    const ev = embeddedFor(2);
    const out = await asHandler(createIndexHandler({ ...ports(0, 2), endedSince: async () => true }))(ev, recordingContext());
    expect(out ?? []).toEqual([]);
    expect(await index.getDocumentChunks(ev.documentId)).toEqual([]);
  });
});
