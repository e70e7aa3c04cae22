import { Agent, request } from 'node:http';

/**
 * A lean HTTP client for the benches' adds: node:http over a keep-alive agent of `connections`
 * sockets. The load generator shares the two cores with memstream, so what it costs counts:
 * `bench ingest`'s 32 clients through fetch (undici) took 0.68 CPU-ms per add, more than the
 * gateway's 0.45 for answering it (2026-12-01, AMD machine); this takes about half.
 */
export function httpClient(baseUrl: string, connections: number, headers: Record<string, string>) {
  const url = new URL(baseUrl);
  const agent = new Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections });
  return {
    /** POST a JSON body (already a string); resolves with the status and the body's text. */
    post(path: string, body: string): Promise<{ status: number; text: string }> {
      return new Promise((resolve, reject) => {
        const req = request(
          { agent, host: url.hostname, port: url.port, path, method: 'POST', headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
          (res) => {
            const parts: Buffer[] = [];
            res.on('data', (d: Buffer) => parts.push(d));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8') }));
            res.on('error', reject);
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    },
    close: () => agent.destroy(),
  };
}
