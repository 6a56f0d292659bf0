/**
 * A Redis Cluster or Sentinel node as written in the config: `host`, `host:port` (an IPv6
 * address in brackets) or a `redis://` / `rediss://` URL. Read the way redis/client.ts reads it
 * (a URL, `redis://` put in front of a bare node), so a node that passes here connects there.
 */
import { isIP } from 'node:net';

const BARE = /^(?:\[([0-9A-Fa-f:.]+)\]|[A-Za-z0-9._-]+)(?::(\d{1,5}))?$/;

/** The node as a URL; only for a node without a problem. */
export const nodeUrl = (node: string): URL => new URL(node.includes('://') ? node : `redis://${node}`);

/**
 * Whether the node (or redis.url) asks for TLS, read from the parsed scheme: `REDISS://` is TLS
 * too. A bare `host:port` never is. Safe on any string: false for one that is not a URL.
 */
export const isTlsNode = (node: string): boolean => node.includes('://') && URL.canParse(node) && new URL(node).protocol === 'rediss:';

/** Why a node is refused, or undefined. Never quotes the node: a URL may carry a password. */
export function redisNodeProblem(node: string): string | undefined {
  const shape = 'must be host:port (an IPv6 address in brackets, port 1-65535) or a redis:// or rediss:// URL with a host';
  if (node.includes('://')) {
    if (!URL.canParse(node)) return shape;
    const url = new URL(node);
    if (!/^rediss?:$/.test(url.protocol) || url.hostname === '' || url.port === '0') return shape;
    // The client takes only the host and port of a node.
    if (url.username !== '' || url.password !== '') return 'must not carry credentials, which would be ignored; use redis.password (redis.sentinel.password for the sentinels)';
    return undefined;
  }
  const bare = BARE.exec(node);
  if (!bare || !URL.canParse(`redis://${node}`)) return shape;
  const [, v6, port] = bare;
  if (v6 !== undefined && isIP(v6) !== 6) return shape;
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) return shape;
  return undefined;
}
