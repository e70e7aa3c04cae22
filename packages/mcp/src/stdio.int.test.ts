import path from 'node:path';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('./memstream mcp with no memstream behind it', () => {
  it('answers the client with an error naming the URL, instead of leaving it waiting', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const client = new Client({ name: 'stdio-int', version: '1.0.0' });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--import', 'tsx', 'packages/cli/src/main.ts', 'mcp', '--url', url, '--key', 'ms_test_key_0123456789'],
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '' },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (b) => (stderr += b));
    await expect(client.connect(transport)).rejects.toThrow(`memstream at ${url} did not answer`);
    await client.close();
    expect(stderr).toContain(`memstream mcp: memstream at ${url} did not answer`);
  }, 60_000);
});
