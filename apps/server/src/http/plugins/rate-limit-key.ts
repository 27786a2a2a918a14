import { isIPv4, isIPv6 } from 'node:net';

/** Expands an IPv6 address to its eight 16-bit groups (an embedded IPv4 tail becomes two). */
function ipv6Groups(ip: string): number[] | null {
  let text = ip.split('%')[0]!.toLowerCase();
  const tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  const maybeV4 = text.slice(lastColon + 1);
  if (isIPv4(maybeV4)) {
    const [a, b, c, d] = maybeV4.split('.').map(Number) as [number, number, number, number];
    tail.push((a << 8) | b, (c << 8) | d);
    // Keep a `::` that precedes the IPv4 tail; drop a single separating colon.
    text = text.slice(0, lastColon + 1);
    if (!text.endsWith('::')) text = text.slice(0, -1);
  }
  const [headText, restText] = text.includes('::') ? text.split('::') : [text, undefined];
  const parse = (s: string | undefined) =>
    s
      ? s
          .split(':')
          .filter((g) => g !== '')
          .map((g) => Number.parseInt(g, 16))
      : [];
  const head = parse(headText);
  const rest = [...parse(restText), ...tail];
  if (restText === undefined && tail.length === 0 && head.length !== 8) return null;
  const missing = 8 - head.length - rest.length;
  if (missing < 0 || head.concat(rest).some((g) => Number.isNaN(g) || g < 0 || g > 0xffff)) return null;
  return [...head, ...new Array<number>(restText === undefined ? 0 : missing).fill(0), ...rest];
}

/**
 * The rate-limit bucket of a client address. IPv4 (also written IPv4-mapped) is the
 * address itself; IPv6 is its /64 network, because one subscriber usually holds a whole
 * /64 and could otherwise rotate through fresh buckets.
 */
export function rateLimitKey(ip: string): string {
  if (ip.toLowerCase().startsWith('::ffff:') && isIPv4(ip.slice(7))) return ip.slice(7);
  if (!isIPv6(ip)) return ip;
  const groups = ipv6Groups(ip);
  if (groups?.length !== 8) return ip;
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}
