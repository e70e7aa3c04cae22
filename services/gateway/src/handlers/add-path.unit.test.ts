import { describe, expect, it } from 'vitest';
import { DocumentEvent, type DocumentSubmitted } from '@memstream/contracts';
import { addDocument, type DocumentHead, type GatewayPorts } from './documents.js';

// The add path is the hottest request there is: a document without a customId gets a new random
// id, so there is no history to read before publishing it.
function ports() {
  const heads = new Map<string, DocumentHead>();
  const calls = { head: 0, publish: [] as Array<{ expectLastSeq: number | undefined }> };
  const p = {
    events: {
      async head(id: string): Promise<DocumentHead> {
        calls.head++;
        return heads.get(id) ?? { submitted: null, submittedSeq: 0, revision: 0, deleted: false, metadataUpdate: null, metadataSeq: 0 };
      },
      async publish(event: DocumentEvent, opts: { expectLastSeq?: number } = {}) {
        DocumentEvent.parse(event);
        calls.publish.push({ expectLastSeq: opts.expectLastSeq });
        heads.set(event.documentId, { submitted: event as DocumentSubmitted, submittedSeq: calls.publish.length, revision: event.revision, deleted: false, metadataUpdate: null, metadataSeq: 0 });
        return calls.publish.length;
      },
    },
    tagContexts: { get: async () => null, set: async () => {} },
    now: () => new Date('2026-11-23T00:00:00Z'),
  };
  return { ports: p as unknown as GatewayPorts, calls };
}

describe('add: the log is read only when there may be history', () => {
  it('a document without a customId is published as revision 1 of a new id, expecting no earlier one, with no log read', async () => {
    const { ports: p, calls } = ports();
    const r = await addDocument(p, { content: 'hello' });
    expect(r.status).toBe('queued');
    expect(calls.head).toBe(0);
    expect(calls.publish).toEqual([{ expectLastSeq: 0 }]);
  });

  it('a customId is looked up: the same customId is the same document', async () => {
    const { ports: p, calls } = ports();
    const a = await addDocument(p, { content: 'one', customId: 'note-1' });
    const b = await addDocument(p, { content: 'two', customId: 'note-1' });
    expect(b.id).toBe(a.id);
    expect(calls.head).toBe(2);
    expect(calls.publish).toEqual([{ expectLastSeq: 0 }, { expectLastSeq: 1 }]);
  });
});

describe('add: the reads of the tag context and the settings', () => {
  it('are in flight together, not one round trip to the broker after the other', async () => {
    const { ports: base } = ports();
    let inFlight = 0;
    let most = 0;
    const read = async <T>(value: T): Promise<T> => {
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setTimeout(r, 5));
      inFlight--;
      return value;
    };
    const p = { ...base, tagContexts: { get: () => read(null), set: async () => {} }, settings: { get: () => read({}), update: async () => ({}) } } as unknown as GatewayPorts;
    expect((await addDocument(p, { content: 'hello', containerTag: 'a' })).status).toBe('queued');
    expect(most).toBe(2);
  });
});
