import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@memstream/kit';
import { DEFAULT_LIMITS, type ExtractContext } from '../kinds.js';
import { decodeHtml, extractHtmlString, htmlExtractor, looksLikeHtml } from './html.js';

const para = (s: string) => `<p>${s} ${'The pipeline keeps every stage idempotent, so a redelivered event changes nothing, and the projection catches up. '.repeat(4)}</p>`;

const ARTICLE_PAGE = `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Event sourcing in practice | The Engineering Blog</title>
  <style>body { font-family: sans-serif }</style>
  <script>window.analytics = { track() {} };</script>
</head>
<body>
  <header><div class="logo">The Engineering Blog</div></header>
  <nav class="site-nav"><ul><li><a href="/">Home</a></li><li><a href="/archive">Archive</a></li><li><a href="/about">About us</a></li></ul></nav>
  <main>
    <article>
      <h1>Event sourcing in practice</h1>
      <p class="byline">By Ada</p>
      ${para('Event sourcing stores every change as an immutable event.')}
      <h2>Why events</h2>
      ${para('An append-only log makes replays and audits cheap.')}
      <ul>
        <li>Replays rebuild any projection</li>
        <li>Audits read the log directly</li>
        <li>Consumers scale out independently</li>
      </ul>
      <h2>Idempotent handlers</h2>
      ${para('Handlers must tolerate redelivery.')}
      <pre><code class="language-ts">const seen = new Set&lt;string&gt;();
if (seen.has(event.id)) return;</code></pre>
      ${para('With that in place, retries are safe.')}
      <p><img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==" alt="diagram"> <a href="/posts/next">Read the next post</a></p>
    </article>
  </main>
  <aside class="sidebar"><h3>Related posts</h3><ul><li><a href="/x">Sidebar teaser one</a></li><li><a href="/y">Sidebar teaser two</a></li></ul></aside>
  <footer><p>Copyright 2024 The Engineering Blog. Privacy policy. Cookie settings.</p></footer>
  <iframe src="https://ads.example/frame"></iframe>
</body>
</html>`;

describe('extractHtmlString', () => {
  it('keeps the article as Markdown and drops the page furniture', () => {
    const out = extractHtmlString(ARTICLE_PAGE, 'https://blog.example/posts/event-sourcing');
    expect(out.type).toBe('webpage');
    expect(out.format).toBe('markdown');
    expect(out.url).toBe('https://blog.example/posts/event-sourcing');
    expect(out.title).toBe('Event sourcing in practice');
    const md = out.text;
    expect(md).toMatch(/^# Event sourcing in practice$/m);
    expect(md).toMatch(/^#{2,3} Why events$/m);
    expect(md).toMatch(/^#{2,3} Idempotent handlers$/m);
    expect(md).toContain('Event sourcing stores every change as an immutable event.');
    expect(md).toMatch(/^- Replays rebuild any projection$/m);
    expect(md).toMatch(/^- Consumers scale out independently$/m);
    expect(md).toContain('```ts\nconst seen = new Set<string>();\nif (seen.has(event.id)) return;\n```');
    // Relative links resolved against the page.
    expect(md).toContain('[Read the next post](https://blog.example/posts/next)');
    for (const gone of ['Archive', 'About us', 'Sidebar teaser', 'Copyright 2024', 'Cookie settings', 'window.analytics', 'font-family', 'base64', 'ads.example']) {
      expect(md).not.toContain(gone);
    }
  });

  it('uses the whole of a fragment, with type text when no URL is given', () => {
    const out = extractHtmlString('<h2>Release notes</h2><p>Fixed the <b>retry</b> loop.</p><ul><li>one</li><li>two</li></ul><script>alert(1)</script>', null);
    expect(out.type).toBe('text');
    expect(out.format).toBe('markdown');
    expect(out.title).toBe('Release notes');
    expect(out.text).toBe('## Release notes\n\nFixed the **retry** loop.\n\n- one\n- two');
  });

  it('falls back to the body minus navigation when Readability finds no article', () => {
    const page = '<!doctype html><html><head><title>Tiny</title></head><body><nav><a href="/">Home link</a></nav><div>Just one short line.</div><footer>Footer text</footer></body></html>';
    const out = extractHtmlString(page, null);
    expect(out.title).toBe('Tiny');
    expect(out.text).toContain('Just one short line.');
    expect(out.text).not.toContain('Footer text');
    expect(out.text).not.toContain('Home link');
  });

  it('turns a table into a pipe table', () => {
    const out = extractHtmlString('<table><thead><tr><th>Stage</th><th>Retries</th></tr></thead><tbody><tr><td>extract</td><td>5</td></tr><tr><td>embed</td><td>3</td></tr></tbody></table>', null);
    expect(out.text).toBe('| Stage | Retries |\n| --- | --- |\n| extract | 5 |\n| embed | 3 |');
  });
});

describe('looksLikeHtml', () => {
  it.each([
    ['<!DOCTYPE html><html><body>x</body></html>'],
    ['  <!doctype html>\n<title>x</title>'],
    ['<html lang="en"><head></head></html>'],
    ['<!-- saved page -->\n<html><body>hi</body></html>'],
    ['<p>Hello <b>world</b></p>'],
    ['<div class="post">\n  <h1>Title</h1>\n  <p>Body text here.</p>\n</div>'],
    ['<h2>Notes</h2>\n<ul>\n<li>one</li>\n<li>two</li>\n</ul>'],
  ])('HTML: %s', (s) => expect(looksLikeHtml(s)).toBe(true));

  it.each([
    ['a < b and c > d'],
    ['if x<y and y>z then swap'],
    ['Use Array<string> and Map<K, V> in TypeScript.'],
    ['Just a plain sentence.'],
    ['Line one<br>\nline two'],
    ['# Readme\n\nSome text with a <details> tag.\n\n- item\n- item\n\nMore prose here.\nAnd here.\nAnd here too.'],
    ['The <p> element is a paragraph; write it as <p>text</p> in a page.\nMore prose.\nEven more prose.\nAnd yet more.'],
    [''],
  ])('not HTML: %s', (s) => expect(looksLikeHtml(s)).toBe(false));
});

describe('htmlExtractor', () => {
  let dir: string;
  const ctx = (): ExtractContext => ({ limits: DEFAULT_LIMITS, log: createLogger('test', { level: 'silent' }), workDir: dir, signal: new AbortController().signal });
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'memstream-html-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('decodes the charset a <meta> declares', async () => {
    const html = '<html><head><meta charset="iso-8859-1"><title>Caf\u00e9</title></head><body><p>Cr\u00e8me br\u00fbl\u00e9e</p></body></html>';
    const file = path.join(dir, 'latin1.html');
    await writeFile(file, Buffer.from(html, 'latin1'));
    const out = await htmlExtractor.extract({ path: file, size: html.length, filename: 'latin1.html', mimeType: 'text/html', fileType: null }, 'html', ctx());
    expect(out.title).toBe('Caf\u00e9');
    expect(out.text).toContain('Cr\u00e8me br\u00fbl\u00e9e');
  });

  it('reads undeclared non-UTF-8 bytes as windows-1252 and honours a charset in the MIME type', () => {
    expect(decodeHtml(Buffer.from([0x3c, 0x70, 0x3e, 0x93, 0x68, 0x69, 0x94]), null)).toBe('<p>\u201chi\u201d');
    expect(decodeHtml(Buffer.from('<p>\u00e9</p>', 'latin1'), 'text/html; charset=ISO-8859-1')).toBe('<p>\u00e9</p>');
    expect(decodeHtml(Buffer.from('<p>\u00e9</p>', 'utf8'), null)).toBe('<p>\u00e9</p>');
  });
});
