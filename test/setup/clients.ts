/**
 * The Redis clients the store suites run on (issue 19, item 4): ioredis, and node-redis 5
 * and 6 (the `redis` package; `redis6` is its 6.x installed under an alias). Each entry
 * connects a standalone client, a Cluster client or a Sentinel client to servers the test
 * started (test/setup/redis.ts) and hands back the client with a way to close it. Suites
 * loop over {@link CLIENTS} (`describe.each`) instead of being copied per client.
 *
 * `admin` is an ioredis client on the same servers for the suites' own inspection (keys
 * without expiry, SCRIPT FLUSH): what a suite checks must not depend on the client under
 * test.
 */
import { Cluster, Redis } from 'ioredis';
import * as redis5 from 'redis';
import * as redis6 from 'redis6';

export type ClientName = 'ioredis' | 'node-redis 5' | 'node-redis 6';

export interface Connected {
  /** The client under test, connected. */
  readonly client: object;
  close(): Promise<void>;
}

/** An ACL user to log in as (test/setup/redis-paths.ts `loginFor`); none: the default user. */
export interface Login {
  readonly username?: string;
  readonly password?: string;
}

export interface ClientKind {
  readonly name: ClientName;
  standalone(port: number, login?: Login): Promise<Connected>;
  cluster(ports: readonly number[], login?: Login): Promise<Connected>;
  /** A Sentinel client for master `name` through the sentinels on `sentinelPorts`. */
  sentinel(name: string, sentinelPorts: readonly number[]): Promise<Connected>;
}

const host = '127.0.0.1';

function ioredis(): ClientKind {
  return {
    name: 'ioredis',
    async standalone(port, login = {}) {
      const client = new Redis({ port, host, ...login });
      await client.ping();
      return { client, close: async () => void client.disconnect() };
    },
    async cluster(ports, login = {}) {
      const client = new Cluster(
        ports.map((port) => ({ host, port })),
        { redisOptions: login },
      );
      await client.ping();
      return { client, close: async () => void client.disconnect() };
    },
    async sentinel(name, sentinelPorts) {
      const client = new Redis({
        sentinels: sentinelPorts.map((port) => ({ host, port })),
        name,
        // Reconnect quickly through a failover; the store's deadline bounds every call.
        retryStrategy: () => 50,
        sentinelRetryStrategy: () => 50,
        maxRetriesPerRequest: 1,
      });
      client.on('error', () => {});
      await client.ping();
      return { client, close: async () => void client.disconnect() };
    },
  };
}

/** Both node-redis majors have the same entry points (typed as 5's); only the package differs. */
function nodeRedis(name: ClientName, lib: typeof redis5): ClientKind {
  // A failed reconnect is retried after 50 ms; errors are the store's to report.
  const socket = { host, reconnectStrategy: () => 50 };
  return {
    name,
    async standalone(port, login = {}) {
      const client = lib.createClient({ socket: { ...socket, port }, ...login });
      client.on('error', () => {});
      await client.connect();
      return { client, close: async () => void client.destroy() };
    },
    async cluster(ports, login = {}) {
      // The login goes to every node's client (`defaults`), the ones found later too.
      const client = lib.createCluster({ rootNodes: ports.map((port) => ({ socket: { host, port } })), defaults: { ...login } });
      client.on('error', () => {});
      await client.connect();
      return { client, close: async () => void client.destroy() };
    },
    async sentinel(master, sentinelPorts) {
      const client = lib.createSentinel({
        name: master,
        sentinelRootNodes: sentinelPorts.map((port) => ({ host, port })),
        // As ioredis' maxRetriesPerRequest: 1, a command fails while the master is away
        // instead of waiting in a queue for the next one.
        nodeClientOptions: { socket: { reconnectStrategy: () => 50 }, disableOfflineQueue: true },
        sentinelClientOptions: { socket: { reconnectStrategy: () => 50 } },
      });
      client.on('error', () => {});
      await client.connect();
      return { client, close: async () => void client.destroy() };
    },
  };
}

export const CLIENTS: readonly ClientKind[] = [
  ioredis(),
  nodeRedis('node-redis 5', redis5),
  nodeRedis('node-redis 6', redis6 as unknown as typeof redis5),
];

export const clientNamed = (name: ClientName): ClientKind => CLIENTS.find((c) => c.name === name) as ClientKind;
