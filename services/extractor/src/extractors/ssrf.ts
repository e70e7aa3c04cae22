import { BlockList, isIP } from 'node:net';
import { isForbiddenAddress, normaliseAddress as normalise } from '@memstream/kit';

/** The address policy itself lives in @memstream/kit (the notifier's webhook deliveries apply it too). */
export { isForbiddenAddress };

/** Networks and host names an operator trusts: fetched even when the address policy would refuse them. */
export interface FetchAllowList {
  /** CIDRs (a bare address is a /32 or /128). */
  addresses: BlockList;
  /** Host names matched exactly; an entry starting with '.' matches every subdomain of it. */
  hosts: ReadonlySet<string>;
}

export interface FetchPolicy {
  allow: FetchAllowList;
  /** Connecting plus receiving the response headers of one request, and the longest silence while a body streams. */
  timeoutMs: number;
  /** The whole fetch: every redirect and the body. */
  totalTimeoutMs: number;
  /** Bytes of body kept, counted after decompression. */
  maxBytes: number;
  /** Redirects followed; one more fails the fetch. */
  maxRedirects: number;
  userAgent: string;
}

export const DEFAULT_FETCH_POLICY: FetchPolicy = {
  allow: { addresses: new BlockList(), hosts: new Set() },
  timeoutMs: 15_000,
  totalTimeoutMs: 60_000,
  maxBytes: 10 * 1024 * 1024,
  maxRedirects: 5,
  userAgent: 'Mozilla/5.0 (compatible; memstream-extractor/0.1)',
};

const HOST_RE = /^\.?(?=.{1,253}$)([a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/;

/**
 * Parse an allow list such as "127.0.0.1/32,10.0.0.0/8,intranet.example,.corp.example"
 * (commas or whitespace between entries). Throws on an entry that is neither a CIDR, an address
 * nor a host name, so a typo fails at start-up instead of silently allowing nothing.
 */
export function parseFetchAllow(spec: string): FetchAllowList {
  const addresses = new BlockList();
  const hosts = new Set<string>();
  for (const raw of spec.split(/[\s,]+/)) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    const slash = entry.indexOf('/');
    const addr = normalise(slash >= 0 ? entry.slice(0, slash) : entry);
    const family = isIP(addr);
    if (family !== 0) {
      const max = family === 4 ? 32 : 128;
      const prefix = slash >= 0 ? Number(entry.slice(slash + 1)) : max;
      if (!Number.isInteger(prefix) || prefix < 0 || prefix > max) throw new Error(`fetch allow list: bad prefix length in ${JSON.stringify(raw)}`);
      addresses.addSubnet(addr, prefix, family === 4 ? 'ipv4' : 'ipv6');
    } else if (slash < 0 && HOST_RE.test(entry)) {
      hosts.add(entry.replace(/\.$/, ''));
    } else {
      throw new Error(`fetch allow list: ${JSON.stringify(raw)} is neither a CIDR, an IP address nor a host name`);
    }
  }
  return { addresses, hosts };
}

/** Whether the operator allowed this host name outright. */
export function isAllowedHost(host: string, allow: FetchAllowList): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  if (allow.hosts.has(h)) return true;
  for (let i = h.indexOf('.'); i >= 0; i = h.indexOf('.', i + 1)) if (allow.hosts.has(h.slice(i))) return true;
  return false;
}

/**
 * The reason the connection to `ip` (reached through the name `host`) is refused, or null.
 * The allow list wins over the address policy.
 */
export function checkAddress(ip: string, host: string, policy: Pick<FetchPolicy, 'allow'>): string | null {
  if (isAllowedHost(host, policy.allow)) return null;
  const addr = normalise(ip);
  const family = isIP(addr);
  if (family !== 0 && policy.allow.addresses.check(addr, family === 4 ? 'ipv4' : 'ipv6')) return null;
  return isForbiddenAddress(addr);
}
