import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestStack, type TestStack } from './support/stack.js';

const ROOT = path.resolve(import.meta.dirname, '..');

/** `./memstream import …` as a user runs it (stderr is not a terminal: one progress line every 2 s). */
function runImportCli(stack: TestStack, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'packages/cli/src/main.ts', 'import', ...args], {
      cwd: ROOT,
      env: { ...process.env, MEMSTREAM_URL: stack.baseUrl, MEMSTREAM_API_KEY: stack.apiKey, MEMSTREAM_INVOKE_CWD: ROOT },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b) => (stdout += b));
    child.stderr.on('data', (b) => (stderr += b));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/**
 * 500 files in nested folders: Markdown, HTML, JSON and text, 5 CSV (each costs the extractor a
 * sandboxed child process, seconds under load: few keep the runtime modest) and 10 empty files,
 * which cannot become documents.
 */
function makeFolder(root: string): { total: number; empty: number } {
  const kinds: ((i: number) => [string, string])[] = [
    (i: number) => [`note-${i}.md`, `# Note ${i}\n\nThe import test wrote note number ${i} about topic ${i % 17}.\n`],
    (i: number) => [`page-${i}.html`, `<html><head><title>Page ${i}</title></head><body><article><h1>Page ${i}</h1><p>Paragraph of page ${i}, about the harbour and the lighthouse number ${i}.</p></article></body></html>`],
    (i: number) => [`data-${i}.json`, JSON.stringify({ id: i, name: `record ${i}`, tags: ['import', `t${i % 5}`] })],
    (i: number) => [`plain-${i}.txt`, `Plain text file ${i}. It mentions apples ${i} times.`],
  ];
  let total = 0;
  let empty = 0;
  for (let i = 0; i < 5; i++) {
    writeFileSync(path.join(root, `table-${i}.csv`), `name,value\nrow ${i},${i * 3}\nother ${i},${i * 7}\n`);
    total++;
  }
  for (let i = 0; i < 485; i++) {
    const sub = path.join(root, `dir-${i % 7}`, i % 3 === 0 ? 'nested' : '');
    mkdirSync(sub, { recursive: true });
    const [name, body] = kinds[i % kinds.length]!(i);
    writeFileSync(path.join(sub, name), body);
    total++;
  }
  for (let i = 0; i < 10; i++) {
    writeFileSync(path.join(root, `empty-${i}.txt`), '');
    total++;
    empty++;
  }
  return { total, empty };
}

describe('./memstream import of a folder of 500 mixed files', () => {
  let stack: TestStack;
  let folder: string;
  beforeAll(async () => {
    stack = await startTestStack();
    folder = mkdtempSync(path.join(tmpdir(), 'memstream-import-e2e-'));
  }, 180_000);
  afterAll(async () => {
    await stack?.teardown();
    rmSync(folder, { recursive: true, force: true });
  });

  it('shows progress, ends with every document done or failed with a reason, and a second run sends nothing', async () => {
    const { total, empty } = makeFolder(folder);
    const first = await runImportCli(stack, [folder, '--tag', 'imported', '--metadata', '{"batch":"e2e"}', '--wait']);
    console.log(`first run: ${first.stdout.split("\n")[0]}`);
    if (first.code !== 1) console.log(first.stdout, first.stderr.slice(-3000));
    const progress = first.stderr.split('\n').filter((l) => l.startsWith('import ['));
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(progress.at(-1)).toMatch(new RegExp(`\\] ${total}/${total} · accepted ${total} · unchanged 0 · done ${total - empty} · failed ${empty}`));
    expect(first.stdout).toMatch(new RegExp(`imported ${total} items in [\\d.]+ s: ${total} sent, 0 unchanged since an earlier run \\(not sent\\), ${total - empty} done, ${empty} failed\\n`));
    // The empty files: each failure names the file and why.
    const failures = first.stdout.split('\n').filter((l) => l.includes('empty-'));
    expect(failures).toHaveLength(empty);
    for (const f of failures) expect(f).toMatch(/empty-\d\.txt — \w+: .+ \(document \S+\)/);
    expect(first.code).toBe(1); // something failed

    // What the server holds: every file once, in the tag, with the metadata.
    const list = await api(stack).call('POST', '/v3/documents/list', { containerTags: ['imported'], limit: 1 });
    expect(list.body.pagination.totalItems).toBe(total);
    const one = await api(stack).call('POST', '/v3/documents/list', { containerTags: ['imported'], limit: 1, filepath: path.join(folder, 'dir-0') + '/' });
    expect(one.body.memories[0].metadata).toMatchObject({ batch: 'e2e', importHash: expect.stringMatching(/^[0-9a-f]{64}$/) });

    // Resume: the done ones are not sent again; the failed ones are, and fail again.
    const second = await runImportCli(stack, [folder, '--tag', 'imported', '--metadata', '{"batch":"e2e"}', '--wait']);
    expect(second.stdout).toMatch(new RegExp(`: ${empty} sent, ${total - empty} unchanged since an earlier run \\(not sent\\), 0 done, ${empty} failed\\n`));
    const after = await api(stack).call('POST', '/v3/documents/list', { containerTags: ['imported'], limit: 1 });
    expect(after.body.pagination.totalItems).toBe(total);
  }, 300_000);
});
