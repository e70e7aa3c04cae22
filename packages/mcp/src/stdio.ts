import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { isJSONRPCRequest, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/**
 * `./memstream mcp`: stdio for desktop clients that launch a command, bridged message by message
 * to the gateway's Streamable HTTP endpoint (/mcp) with the API key. The tools run in the gateway,
 * so both transports answer the same, under the same key scope and rate limit.
 * Resolves when the client closes stdin. Nothing but MCP messages may go to stdout.
 */
export async function runStdioBridge(opts: { baseUrl: string; apiKey: string; log: (line: string) => void }): Promise<void> {
  const stdio = new StdioServerTransport();
  const http = new StreamableHTTPClientTransport(new URL('/mcp', opts.baseUrl), {
    requestInit: { headers: { authorization: `Bearer ${opts.apiKey}` } },
  });
  let closed = false;
  const done = new Promise<void>((resolve) => {
    stdio.onclose = () => {
      closed = true;
      void http.close().finally(resolve);
    };
  });
  stdio.onmessage = (msg: JSONRPCMessage) => {
    http.send(msg).catch((err: unknown) => {
      const reason = `memstream at ${opts.baseUrl} did not answer: ${(err as Error).message ?? err}`;
      opts.log(reason);
      // A request must get an answer, or the client waits for ever.
      if (isJSONRPCRequest(msg)) void stdio.send({ jsonrpc: '2.0', id: msg.id, error: { code: -32000, message: reason } });
    });
  };
  http.onmessage = (msg) => {
    if (!closed) void stdio.send(msg);
  };
  http.onerror = (err) => opts.log(`memstream /mcp: ${err.message}`);
  await http.start();
  await stdio.start();
  await done;
}
