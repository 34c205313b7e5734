/**
 * The Redis client `tollgate keys` and `compare --lease` talk through: the one the
 * application already has. ioredis and node-redis (`redis`) are optional peer dependencies
 * of @tollgate/cli, loaded here when such a command runs (ioredis first when both are
 * installed), so the CLI never adds a second client to an app; with neither installed the
 * command says how to add one.
 */
import { cliError, show } from './errors.js';

/** A connected-to-be client for `RedisStore`, with the two calls the command makes on it. */
export interface CliRedis {
  /** The ioredis `Redis`/`Cluster` or node-redis client/cluster, as `RedisStore` takes it. */
  client: object;
  connect(): Promise<void>;
  /** Drops the connection at once (nothing is left to send). */
  close(): void;
}

export interface RedisTarget {
  urls: string[];
  cluster: boolean;
  timeoutMs: number;
}

/** The client packages `keys` can use, in the order they are tried. */
export const CLIENT_PACKAGES = ['ioredis', 'redis'] as const;

/** Loads the first installed client package and builds a client for `target`, not yet connected. */
export async function openRedis(target: RedisTarget, command = 'tollgate keys'): Promise<CliRedis> {
  for (const name of CLIENT_PACKAGES) {
    const loaded = await loadOptional(name);
    if (loaded === undefined) continue;
    try {
      return name === 'ioredis' ? ioredisClient(loaded, target) : nodeRedisClient(loaded, target);
    } catch (err) {
      if ((err as { code?: string }).code?.startsWith('TG_CLI_')) throw err;
      throw cliError(
        'TG_CLI_INVALID_ARGUMENT',
        { path: '--redis', expected: 'a Redis URL', received: show(target.urls[0]), fix: (err as Error).message },
        err,
      );
    }
  }
  throw cliError('TG_CLI_NO_REDIS_CLIENT', {
    path: command,
    expected: `a Redis client installed beside @tollgate/cli: ${CLIENT_PACKAGES.join(' or ')}`,
    received: 'neither',
    fix: 'Install the client your application uses: npm install ioredis, or npm install redis (node-redis).',
  });
}

/** The package's module, or undefined when it is not installed (any other failure is thrown). */
async function loadOptional(name: string): Promise<Record<string, unknown> | undefined> {
  try {
    return (await import(name)) as Record<string, unknown>;
  } catch (err) {
    const code = (err as { code?: string }).code;
    const missing =
      (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && String((err as Error).message).includes(`'${name}'`);
    if (missing) return undefined;
    throw err;
  }
}

type Ctor = new (...args: unknown[]) => { connect(): Promise<unknown>; disconnect(): void; on(event: string, fn: () => void): unknown };

function ioredisClient(mod: Record<string, unknown>, { urls, cluster, timeoutMs }: RedisTarget): CliRedis {
  const { Redis, Cluster } = mod as { Redis: Ctor; Cluster: Ctor };
  const first = urls[0] as string;
  const client = cluster
    ? new Cluster(
        urls.map((u) => seed(u)),
        { redisOptions: { ...credentials(first), connectTimeout: timeoutMs }, clusterRetryStrategy: () => null, lazyConnect: true },
      )
    : new Redis(parseUrl(first).href, { maxRetriesPerRequest: 1, connectTimeout: timeoutMs, retryStrategy: () => null, lazyConnect: true });
  client.on('error', () => {});
  return { client, connect: async () => void (await client.connect()), close: () => client.disconnect() };
}

type NodeRedis = { connect(): Promise<unknown>; destroy(): void; on(event: string, fn: () => void): unknown };

function nodeRedisClient(mod: Record<string, unknown>, { urls, cluster, timeoutMs }: RedisTarget): CliRedis {
  const { createClient, createCluster } = mod as { createClient: (o: object) => NodeRedis; createCluster: (o: object) => NodeRedis };
  // Fail at once instead of reconnecting: an operator's command reports and exits.
  const socket = { connectTimeout: timeoutMs, reconnectStrategy: false };
  for (const u of urls) parseUrl(u);
  const client = cluster
    ? createCluster({ rootNodes: urls.map((url) => ({ url })), defaults: { socket } })
    : createClient({ url: urls[0], socket, disableOfflineQueue: true });
  client.on('error', () => {});
  return { client, connect: async () => void (await client.connect()), close: () => client.destroy() };
}

/** A Cluster seed node from a URL. */
function seed(url: string): { host: string; port: number } {
  const u = parseUrl(url);
  return { host: u.hostname, port: Number(u.port || 6379) };
}

function credentials(url: string): { username?: string; password?: string; tls?: object } {
  const u = parseUrl(url);
  return {
    ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(u.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

function parseUrl(url: string): URL {
  try {
    const u = new URL(url);
    if (u.protocol === 'redis:' || u.protocol === 'rediss:') return u;
  } catch {}
  throw cliError('TG_CLI_INVALID_ARGUMENT', {
    path: '--redis',
    expected: 'a URL redis://host:port or rediss://host:port',
    received: show(url),
    fix: 'Pass --redis redis://127.0.0.1:7000.',
  });
}
