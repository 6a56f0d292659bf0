/**
 * Whether Redis may evict the gateway's keys. Every key the gateway writes has a TTL, so with
 * `maxmemory` set and any policy but `noeviction`, every key is a candidate, and the first to go
 * are not sessions (read on every call) but what guards them (found by the hygiene red team):
 * under `volatile-ttl` a back-channel logout's replay note (`jti:`) goes before any session, so
 * the same logout token is taken again; under the LRU policies a user's index and provider-session
 * set (never read by a proxied call) go first, so a back-channel logout ends nothing and the
 * session is no longer listed; refresh locks and `sid-out:` notes are short-lived and go early too.
 *
 * Read from `INFO memory`, which managed services allow where `CONFIG` is renamed or refused,
 * at every connection (a Sentinel failover's new master may be set up differently).
 */
import { writtenNodes, type RedisClient } from './client.js';

export interface EvictionSetting {
  policy: string;
  maxmemoryBytes: number;
}

/** The policy and limit an `INFO memory` answer states; undefined if it states neither. */
export function parseMemoryInfo(info: string): EvictionSetting | undefined {
  const policy = /^maxmemory_policy:([a-z-]+)$/m.exec(info)?.[1];
  const maxmemory = /^maxmemory:(\d+)$/m.exec(info)?.[1];
  return policy === undefined || maxmemory === undefined ? undefined : { policy, maxmemoryBytes: Number(maxmemory) };
}

/** Without a limit (0) Redis evicts nothing, whatever the policy says. */
export const mayEvict = (setting: EvictionSetting): boolean => setting.maxmemoryBytes > 0 && setting.policy !== 'noeviction';

/** Each node's `INFO memory`, or undefined for a node that could not say (refused, gone). */
const infoOf = (node: RedisClient): Promise<string | undefined> => node.info('memory').catch(() => undefined);

/**
 * Reads the settings now, at each (re)connection, and whenever a Cluster's masters change (a
 * replica promoted within a shard is no reconnection of the Cluster client: found by review),
 * and reports them once every node has said. A node that cannot say (INFO refused, Redis gone
 * again) leaves the last report standing, and is not counted as read: a Cluster's next slot
 * refresh asks again (one failed node had every master counted as read, and none was asked
 * again until the masters changed: found by review).
 */
export function watchEvictionSettings(client: RedisClient, report: (settings: EvictionSetting[]) => void): void {
  let read = new Set<RedisClient>();
  const check = () => {
    const nodes = writtenNodes(client);
    read = new Set(nodes);
    void Promise.all(nodes.map(infoOf)).then((infos) => {
      infos.forEach((info, i) => info === undefined && read.delete(nodes[i]!));
      if (infos.includes(undefined)) return;
      report(infos.map((info) => parseMemoryInfo(info as string)).filter((s): s is EvictionSetting => s !== undefined));
    });
  };
  client.on('ready', check);
  // A Cluster's slot map is read again every few seconds (client.ts); other clients never say this.
  client.on('refresh', () => {
    const masters = writtenNodes(client);
    if (masters.length !== read.size || masters.some((node) => !read.has(node))) check();
  });
  check();
}
