import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectBus, lastEvent, type Bus } from '@memstream/bus';
import { createLogger } from '@memstream/kit';
import { api, startTestStack, waitFor, type TestStack } from './support/stack.js';

const silent = createLogger('test', { level: 'silent' });

/**
 * Issue 12: one tenant cannot hurt another, and deletion deletes. Each case drives real service
 * processes over a private nats-server.
 */
describe('deletion by selector, over the log', () => {
  let stack: TestStack;
  let bus: Bus;
  let http: ReturnType<typeof api>;

  beforeAll(async () => {
    // The gateway alone at first: nothing projects, so the view store knows none of the documents
    // added below — the state the view is in for documents still in flight.
    stack = await startTestStack({ services: ['gateway'] });
    bus = await connectBus({ url: stack.nats.url, name: 'tenancy-test', log: silent });
    http = api(stack);
  }, 60_000);

  afterAll(async () => {
    await bus?.close();
    await stack?.teardown();
  });

  async function addMany(n: number, extra: (i: number) => Record<string, unknown>): Promise<string[]> {
    const res = await Promise.all(Array.from({ length: n }, (_, i) => http.add(`document ${i} of a bulk-delete race`, extra(i))));
    for (const r of res) expect(r.status).toBe(200);
    return res.map((r) => r.body.id as string);
  }

  /** Nothing of these documents left: no view, a tombstone in the log for each. */
  async function expectAllGone(ids: string[], listBody: Record<string, unknown>): Promise<void> {
    await waitFor(
      'the list to be empty',
      async () => {
        const list = await http.call('POST', '/v3/documents/list', listBody);
        return list.body.pagination.totalItems === 0 ? true : undefined;
      },
      10_000,
      100,
    );
    for (const id of ids) {
      expect((await http.get(id)).status, id).toBe(404);
      expect((await lastEvent(bus, id, 'deleted'))?.event.type, id).toBe('document.deleted.v1');
    }
  }

  it('an empty containerTags or ids is refused with 400, and deletes nothing', async () => {
    const [id] = await addMany(1, () => ({ containerTag: 'empty-selector' }));
    for (const body of [{ containerTags: [] }, { ids: [] }, { ids: [id], containerTags: [] }]) {
      const r = await http.call('DELETE', '/v3/documents/bulk', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error).toBeTruthy();
      expect(r.body.details).toMatch(/must not be empty/);
    }
    expect((await http.get(id!)).status).toBe(200);
    expect(await lastEvent(bus, id!, 'deleted')).toBeNull();
  });

  it('by container tag: every document accepted before the delete goes, projected or not', async () => {
    const ids = await addMany(50, () => ({ containerTag: 'race-tag' }));
    const keep = await addMany(3, () => ({ containerTag: 'race-other' }));
    const r = await http.call('DELETE', '/v3/documents/bulk', { containerTags: ['race-tag'] });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: true, deletedCount: 50 });
    // The projection catches up afterwards: the tombstones win over the submissions it applies.
    if (!stack.procs.has('projection')) await stack.start('projection');
    await expectAllGone(ids, { containerTags: ['race-tag'] });
    for (const id of keep) expect((await http.get(id)).status).toBe(200);
  }, 60_000);

  it('by filepath prefix: the same', async () => {
    const ids = await addMany(50, (i) => ({ containerTag: 'race-path', filepath: `/race/dir${i % 3}/f${i}.md` }));
    const keep = await addMany(2, (i) => ({ containerTag: 'race-path', filepath: `/elsewhere/f${i}.md` }));
    const r = await http.call('DELETE', '/v3/documents/bulk', { filepath: '/race/' });
    expect(r.body).toMatchObject({ success: true, deletedCount: 50 });
    await expectAllGone(ids, { containerTags: ['race-path'], filepath: '/race/' });
    for (const id of keep) expect((await http.get(id)).status).toBe(200);
  }, 60_000);

  it('a container tag: settings and counts, then deleted with all its documents', async () => {
    const tag = 'whole-tag';
    const patched = await http.call('PATCH', `/v3/container-tags/${tag}`, { entityContext: 'notes about kettles' });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ containerTag: tag, entityContext: 'notes about kettles' });
    const ids = await addMany(5, () => ({ containerTag: tag }));
    const shared = (await http.add('in two tags', { containerTags: [tag, 'whole-tag-neighbour'] })).body.id as string;
    await waitFor('the view to count them', async () => {
      const got = await http.call('GET', `/v3/container-tags/${tag}`);
      return got.body.documentCount === 6 ? got.body : undefined;
    });
    expect((await http.call('PATCH', `/v3/container-tags/${tag}`, { entityContext: 5 })).status).toBe(400);
    expect((await http.call('PATCH', `/v3/container-tags/${tag}`, { other: 'x' })).status).toBe(400);

    const del = await http.call('DELETE', `/v3/container-tags/${tag}`);
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ success: true, containerTag: tag, deletedCount: 6 });
    await expectAllGone([...ids, shared], { containerTags: [tag] });
    const openapi = await http.call('GET', '/openapi.json');
    for (const m of ['get', 'patch', 'delete']) expect(openapi.body.paths['/v3/container-tags/{tag}']?.[m], m).toBeDefined();
    const after = await http.call('GET', `/v3/container-tags/${tag}`);
    expect(after.body).toMatchObject({ containerTag: tag, entityContext: null, documentCount: 0 });
  }, 60_000);
});
