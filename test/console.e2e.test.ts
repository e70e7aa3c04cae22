import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { api, startTestStack, type TestStack } from './support/stack.js';
import { unique } from './support/sdk.js';

/** Debian's chromium; `./memstream test` installs it (apt, as root) with the other test tools. */
const CHROMIUM = process.env.MEMSTREAM_CHROMIUM ?? '/usr/bin/chromium';
/** Screenshots of every run are kept here (not committed); docs/console.png is one of them. */
const ARTIFACTS = path.resolve(import.meta.dirname, 'artifacts', 'console');
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`console.e2e: skipped, no chromium at ${CHROMIUM} (apt-get install chromium, or set MEMSTREAM_CHROMIUM)`);

describe.skipIf(!haveChromium)('the web console in a real browser (headless chromium)', () => {
  let stack: TestStack;
  let browser: Browser;
  let page: Page;
  const tag = unique('console');
  const shot = (name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    [stack, browser] = await Promise.all([
      startTestStack(),
      chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking'] }),
    ]);
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    // Offline by construction: any request that leaves the gateway's origin fails the test.
    const foreign: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(stack.baseUrl)) foreign.push(r.url());
    });
    page.on('pageerror', (err) => foreign.push(`page error: ${err.message}`));
    (page as unknown as { foreign: string[] }).foreign = foreign;
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.teardown();
  });

  it('connects with the key, and shows a document added through the API reaching done, live', async () => {
    await page.goto(`${stack.baseUrl}/console`);
    await page.fill('#key', stack.apiKey);
    await page.click('#connect');
    await page.locator('#who', { hasText: 'admin key' }).waitFor();
    await page.fill('#filter-tag', tag);
    await page.click('#doc-filters button[type=submit]');
    await page.locator('#live', { hasText: 'live' }).waitFor();

    const added = await api(stack).add('The console test document: a lighthouse keeper writes about storms and ships.', { containerTag: tag });
    expect(added.status).toBe(200);
    const row = page.locator(`#docs tbody tr[data-id="${added.body.id}"]`);
    // The page is not reloaded: the row appears and its status moves on from the event stream.
    await row.locator('td.status', { hasText: 'done' }).waitFor({ timeout: 60_000 });
    // Only a failed document can be retried.
    expect(await api(stack).call('POST', `/v3/documents/${added.body.id}/retry`)).toMatchObject({ status: 400, body: { error: 'Only a failed document can be retried' } });

    await row.click();
    await page.locator('#timeline li', { hasText: 'indexed' }).waitFor();
    expect(await page.locator('#timeline li').count()).toBeGreaterThanOrEqual(5);
    await expect(page.locator('#detail-id').textContent()).resolves.toContain('done');
    await shot('documents');
  }, 90_000);

  it('shows a failure with its reason, and retries it', async () => {
    // Only a URL, to an address the extractor refuses to fetch: failed, permanently, with a reason.
    const added = await api(stack).add('http://127.0.0.1:9/nothing-here', { containerTag: tag });
    const row = page.locator(`#docs tbody tr[data-id="${added.body.id}"]`);
    await row.locator('td.status', { hasText: 'failed' }).waitFor({ timeout: 60_000 });
    await page.selectOption('#filter-status', 'failed');
    await page.click('#doc-filters button[type=submit]');
    // The filtered list replaces the table when its answer arrives: until then the done row is still shown.
    await expect.poll(() => page.locator('#docs tbody tr').count(), { timeout: 10_000 }).toBe(1);
    await row.click();
    await page.locator('#reason', { hasText: 'failed in extracting' }).waitFor();
    await shot('failure');
    await page.click('#retry');
    // A new revision, processed again (and failing again, for the same reason).
    await page.locator('#timeline li', { hasText: 'rev 2' }).first().waitFor({ timeout: 30_000 });
    await expect.poll(async () => (await api(stack).get(added.body.id)).body.status, { timeout: 60_000 }).toBe('failed');
    await page.selectOption('#filter-status', '');
    await page.click('#doc-filters button[type=submit]');
  }, 120_000);

  it('searches from the page: both endpoints side by side, with scores', async () => {
    await page.click('[data-tab=search]');
    await page.fill('#q', 'lighthouse storms');
    await page.fill('#search-tag', tag);
    await page.click('#search-go');
    const v3 = page.locator('#v3-results li.hit').first();
    const v4 = page.locator('#v4-results li.hit').first();
    await v3.waitFor();
    await v4.waitFor();
    await expect(v3.textContent()).resolves.toMatch(/^\d\.\d{3}.*lighthouse keeper/);
    await expect(v4.textContent()).resolves.toMatch(/^\d\.\d{3}.*lighthouse keeper/);
    await shot('search');
  }, 60_000);

  it('creates a scoped key with an expiry, and revokes it', async () => {
    await page.click('[data-tab=keys]');
    await page.fill('#key-tags', tag);
    await page.fill('#key-name', 'console test key');
    await page.fill('#key-days', '7');
    await page.click('#key-create');
    await page.locator('#new-key code', { hasText: 'msk_' }).waitFor({ timeout: 10_000 });
    const secret = (await page.locator('#new-key code').textContent())!;
    expect(secret).toMatch(/^msk_/);
    expect((await api({ baseUrl: stack.baseUrl, apiKey: secret }).call('POST', '/v3/documents/list', {})).status).toBe(200);
    const row = page.locator('#keys tbody tr', { hasText: 'console test key' });
    await row.locator('td.state', { hasText: 'active' }).waitFor();
    await shot('keys');
    await row.locator('button.revoke').click();
    await row.locator('td.state', { hasText: 'revoked' }).waitFor();
    await expect.poll(async () => (await api({ baseUrl: stack.baseUrl, apiKey: secret }).call('POST', '/v3/documents/list', {})).status, { timeout: 10_000 }).toBe(401);
    expect((page as unknown as { foreign: string[] }).foreign).toEqual([]);
  }, 60_000);
});
