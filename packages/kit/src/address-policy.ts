import { promises as dns, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { PermanentError } from './errors.js';

/**
 * Address policy for connections made on a user's behalf: the extractor's URL fetches and the
 * notifier's webhook deliveries. Without it, anyone who can submit a URL (a document, a webhook)
 * can reach the loopback interface, the private network the service runs in, and the cloud
 * metadata endpoint (169.254.169.254, fd00:ec2::254) that hands out credentials.
 */

interface Range {
  net: string;
  prefix: number;
  reason: string;
}

const V4_RANGES: readonly Range[] = [
  { net: '0.0.0.0', prefix: 8, reason: '"this network" address (0.0.0.0/8)' },
  { net: '10.0.0.0', prefix: 8, reason: 'private address (10.0.0.0/8)' },
  { net: '100.64.0.0', prefix: 10, reason: 'carrier-grade NAT address (100.64.0.0/10)' },
  { net: '127.0.0.0', prefix: 8, reason: 'loopback address (127.0.0.0/8)' },
  { net: '169.254.0.0', prefix: 16, reason: 'link-local address (169.254.0.0/16, includes cloud metadata)' },
  { net: '172.16.0.0', prefix: 12, reason: 'private address (172.16.0.0/12)' },
  { net: '192.0.0.0', prefix: 24, reason: 'IETF protocol assignment (192.0.0.0/24)' },
  { net: '192.0.2.0', prefix: 24, reason: 'documentation address (192.0.2.0/24)' },
  { net: '192.168.0.0', prefix: 16, reason: 'private address (192.168.0.0/16)' },
  { net: '198.18.0.0', prefix: 15, reason: 'benchmarking address (198.18.0.0/15)' },
  { net: '198.51.100.0', prefix: 24, reason: 'documentation address (198.51.100.0/24)' },
  { net: '203.0.113.0', prefix: 24, reason: 'documentation address (203.0.113.0/24)' },
  { net: '224.0.0.0', prefix: 4, reason: 'multicast address (224.0.0.0/4)' },
  // 240/4 includes the limited broadcast address 255.255.255.255.
  { net: '240.0.0.0', prefix: 4, reason: 'reserved or broadcast address (240.0.0.0/4)' },
];

const V6_RANGES: readonly Range[] = [
  // Checked before fc00::/7 so the metadata endpoint is named as such.
  { net: 'fd00:ec2::254', prefix: 128, reason: 'cloud metadata address (fd00:ec2::254)' },
  { net: '::', prefix: 128, reason: 'unspecified address (::)' },
  { net: '::1', prefix: 128, reason: 'loopback address (::1)' },
  // The rest of ::/96 is the deprecated IPv4-compatible form; nothing legitimate lives there.
  { net: '::', prefix: 96, reason: 'IPv4-compatible address (::/96, deprecated)' },
  { net: 'fc00::', prefix: 7, reason: 'unique local address (fc00::/7)' },
  { net: 'fe80::', prefix: 10, reason: 'link-local address (fe80::/10)' },
  { net: 'fec0::', prefix: 10, reason: 'site-local address (fec0::/10, deprecated)' },
  { net: 'ff00::', prefix: 8, reason: 'multicast address (ff00::/8)' },
  { net: '2001:db8::', prefix: 32, reason: 'documentation address (2001:db8::/32)' },
];

function compile(ranges: readonly Range[], type: 'ipv4' | 'ipv6'): Array<{ list: BlockList; reason: string }> {
  // One BlockList per range, because BlockList.check answers yes/no and the error should say which range.
  return ranges.map(({ net, prefix, reason }) => {
    const list = new BlockList();
    list.addSubnet(net, prefix, type);
    return { list, reason };
  });
}

const V4_RULES = compile(V4_RANGES, 'ipv4');
const V6_RULES = compile(V6_RANGES, 'ipv6');

/** Address ranges whose low 32 bits (or bits 16–47 for 6to4) are an IPv4 address the packet ends up at. */
const EMBEDS_V4: ReadonlyArray<{ prefix: readonly number[]; at: number; name: string }> = [
  { prefix: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff], at: 12, name: 'IPv4-mapped' },
  // NAT64 well-known prefix 64:ff9b::/96: a NAT64 gateway forwards to the embedded IPv4 address.
  { prefix: [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0], at: 12, name: 'NAT64' },
  // 6to4 2002::/16: a relay forwards to the embedded IPv4 address.
  { prefix: [0x20, 0x02], at: 2, name: '6to4' },
];

/** The 16 bytes of an IPv6 address (without brackets or zone), or null when it is not one. */
function ipv6Bytes(ip: string): Uint8Array | null {
  if (isIP(ip) !== 6) return null;
  let text = ip;
  // A trailing dotted quad (::ffff:127.0.0.1) is two 16-bit groups.
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', rest] = text.split('::') as [string, string | undefined];
  const groups = (s: string): number[] => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const all = rest === undefined ? left : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  if (all.length !== 8) return null;
  const bytes = new Uint8Array(16);
  all.forEach((g, i) => {
    bytes[2 * i] = g >> 8;
    bytes[2 * i + 1] = g & 0xff;
  });
  return bytes;
}

export function normaliseAddress(ip: string): string {
  let s = ip.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  // A zone (fe80::1%eth0) does not change which range the address is in.
  const zone = s.indexOf('%');
  return zone >= 0 ? s.slice(0, zone) : s;
}

/**
 * Why this address must not be fetched, or null when it is an ordinary public address.
 * Anything that is not an IP address is refused: the caller resolves names first.
 */
export function isForbiddenAddress(ip: string): string | null {
  const addr = normaliseAddress(ip);
  const family = isIP(addr);
  if (family === 4) {
    for (const rule of V4_RULES) if (rule.list.check(addr, 'ipv4')) return rule.reason;
    return null;
  }
  if (family !== 6) return `${JSON.stringify(ip)} is not an IP address`;
  const bytes = ipv6Bytes(addr);
  if (!bytes) return `${JSON.stringify(ip)} is not an IP address`;
  for (const e of EMBEDS_V4) {
    if (e.prefix.every((b, i) => bytes[i] === b)) {
      const v4 = Array.from(bytes.subarray(e.at, e.at + 4)).join('.');
      const inner = isForbiddenAddress(v4);
      return inner ? `${e.name} form of ${v4}, a ${inner}` : null;
    }
  }
  for (const rule of V6_RULES) if (rule.list.check(addr, 'ipv6')) return rule.reason;
  return null;
}

/**
 * A fetch or a delivery the address policy refused. The message reaches the tenant (a document's
 * error, a delivery record) and says only that the host is, or resolves to, a private or reserved
 * address; `detail` (which address, which rule) is for the server log: what an internal name
 * resolves to is not the tenant's business.
 */
export class AddressRefused extends PermanentError {
  readonly host: string;
  readonly detail: string;
  /** `what`: "refused to fetch" or "refused to deliver to"; `hint`: what the operator could change. */
  constructor(what: string, host: string, detail: string, hint = '') {
    super(`${what} ${host}: ${isIP(normaliseAddress(host)) ? 'it is' : 'it resolves to'} a private or reserved address${hint ? ` (${hint})` : ''}`);
    this.host = host;
    this.detail = detail;
  }
}

/** Resolves a host name to every address it has (dns.lookup with all: true). Replaceable in tests. */
export type Resolver = (host: string, family: 0 | 4 | 6) => Promise<LookupAddress[]>;

export const systemResolver: Resolver = (host, family) => dns.lookup(host, { all: true, family });

/**
 * A `lookup` for http(s).request: resolve, drop every address `check` refuses (it returns the
 * reason, or null), and hand the socket only what is left. The socket connects to exactly the
 * address checked here, so a DNS answer that changes between a check and the connection
 * (rebinding) cannot slip through. When nothing is left, the error — `refused(host, reason)`, or
 * "could not resolve" — goes to the socket and to `onRefused`, so the caller can report it rather
 * than the socket error it causes.
 */
export function guardedLookup(opts: {
  resolve: Resolver;
  check: (address: string, hostname: string) => string | null;
  refused: (hostname: string, reason: string) => PermanentError;
  onRefused: (err: PermanentError) => void;
}): LookupFunction {
  return (hostname, options, callback) => {
    const family = options.family === 4 || options.family === 6 ? options.family : 0;
    opts.resolve(hostname, family).then(
      (addresses) => {
        const allowed: LookupAddress[] = [];
        let reason: string | null = null;
        for (const a of addresses) {
          const r = opts.check(a.address, hostname);
          if (r) reason ??= `${hostname} resolves to ${a.address}, a ${r}`;
          else allowed.push(a);
        }
        const first = allowed[0];
        if (!first) {
          const err = reason ? opts.refused(hostname, reason) : new PermanentError(`could not resolve ${hostname}`);
          opts.onRefused(err);
          callback(err, []);
        } else if (options.all) callback(null, allowed);
        else callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, []),
    );
  };
}
