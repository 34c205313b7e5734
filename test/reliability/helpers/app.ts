/**
 * The app under test of the reliability suite, run as a child process (see children.ts):
 * an Express 5 or a Fastify 5 server with `rateLimit` / the plugin on a `RedisStore`
 * (standalone or Cluster), listening on a free loopback port.
 *
 * Configuration is one JSON argument ({@link AppConfig}). Over IPC the child reports
 * `{ type: 'ready', port }`, then every breaker change and a count of store errors as
 * they happen, and answers `'stats'` with the
 * process' handle, timer and memory figures (the soak reads them). `'stop'` closes the
 * server, the store and the Redis client and exits 0: a clean exit proves that nothing
 * the app started is left running.
 */
import http from 'node:http';
import { constant, createLimiter, header, type Rule } from '@tollgate/core';
import { rateLimit } from '@tollgate/express';
import { tollgate } from '@tollgate/fastify';
import { type BreakerEvent, RedisStore, type StoreErrorEvent } from '@tollgate/redis';
import express from 'express';
import fastify from 'fastify';
import { Cluster, Redis } from 'ioredis';

/** A rule as JSON: its key is named, not a function. */
export interface RuleConfig extends Omit<Rule, 'key' | 'cost'> {
  /** `'ip'` (the adapter's default key), `'const'` (one key for all), or `'header:<name>'`. */
  keyBy?: 'ip' | 'const' | `header:${string}`;
}

export interface AppConfig {
  framework: 'express' | 'fastify';
  /** The Redis client the store runs on (test/setup/clients.ts). @default 'ioredis' */
  client?: 'ioredis' | 'node-redis 5' | 'node-redis 6';
  /** Standalone Redis port, or the startup nodes of a Cluster. */
  redis: { port: number } | { cluster: number[] };
  rules: RuleConfig[];
  onStoreError?: 'allow' | 'deny' | 'local';
  timeoutMs?: number;
  breaker?: { failures?: number; cooldownMs?: number };
  /** Store key prefix (RedisStore `prefix`). */
  storePrefix?: string;
  /** Limiter prefix (the rule id namespace). */
  prefix?: string;
  trustProxy?: string | number | false;
  denyCache?: boolean;
  /** Local fallback share: limits divided by this while Redis is away. */
  instances?: number;
}

export type AppMessage =
  | { type: 'ready'; port: number; pid: number }
  | { type: 'breaker'; from: string; to: string; at: number }
  | { type: 'store-error'; operation: string; message: string; at: number }
  | {
      type: 'stats';
      handles: Record<string, number>;
      resources: Record<string, number>;
      rss: number;
      heapUsed: number;
      /** The store errors so far (the first 10 000): code (`TG_STORE_TIMEOUT`, else the Redis error's first word) and when. */
      storeErrors: Array<[code: string, at: number]>;
    };

/** Set on an admitted response when the failure policy, not Redis, decided it. */
export const DEGRADED_HEADER = 'x-tollgate-degraded';
/**
 * Set on every response: how much longer than a plain `timeoutMs` timer, started as the
 * request reached the limiter, the app took to answer it (ms; 0 when it answered before that
 * timer fired). A request that waited for Redis past the deadline shows here; a busy machine
 * does not, since it delays the timer as much as the store's own deadline timer.
 */
export const LATE_HEADER = 'x-tollgate-late';

const config = JSON.parse(process.argv[2] as string) as AppConfig;
const send = (m: AppMessage) => process.send?.(m);

/** A node-redis client (5 or 6) of the same settings as the ioredis one below. */
async function nodeRedisClient(lib: typeof import('redis')): Promise<{ client: object; close: () => void }> {
  // Reconnect quickly after an outage; commands fail at once while disconnected (as
  // ioredis' maxRetriesPerRequest: 1 makes them) instead of queueing for the reconnect.
  const socket = { host: '127.0.0.1', reconnectStrategy: () => 50 };
  if ('port' in config.redis) {
    const c = lib.createClient({ socket: { ...socket, port: config.redis.port }, disableOfflineQueue: true, name: 'tollgate-app' });
    c.on('error', () => {});
    await c.connect();
    return { client: c, close: () => c.destroy() };
  }
  const c = lib.createCluster({
    rootNodes: config.redis.cluster.map((port) => ({ socket: { ...socket, port } })),
    defaults: { socket, disableOfflineQueue: true, name: 'tollgate-app' },
    // node-redis 6: ask the Cluster for its slots again 500 ms after a node starts
    // reconnecting (default 5 s), so that a failover is followed soon. node-redis 5 has no
    // such option: it learns of a new master only from a MOVED reply (docs/distributed.md).
    ...{ topologyRefreshOnReconnectionAttemptStrategy: 500 },
  });
  c.on('error', () => {});
  await c.connect();
  return { client: c, close: () => c.destroy() };
}

function ioredisClient(): { client: object; close: () => void } {
  const c =
    'port' in config.redis
      ? new Redis({
          port: config.redis.port,
          host: '127.0.0.1',
          // Reconnect quickly after an outage; the store's deadline bounds every call anyway.
          retryStrategy: () => 50,
          maxRetriesPerRequest: 1,
          connectionName: 'tollgate-app',
        })
      : new Cluster(
          config.redis.cluster.map((port) => ({ host: '127.0.0.1', port })),
          {
            clusterRetryStrategy: () => 50,
            redisOptions: { maxRetriesPerRequest: 1, connectionName: 'tollgate-app' },
            slotsRefreshTimeout: 500,
            slotsRefreshInterval: 1000,
          },
        );
  // Connection errors are expected in a fault test; the store reports what matters.
  c.on('error', () => {});
  return { client: c, close: () => c.disconnect() };
}

const { client, close: closeClient } =
  config.client === 'node-redis 5'
    ? await nodeRedisClient(await import('redis'))
    : config.client === 'node-redis 6'
      ? await nodeRedisClient((await import('redis6')) as unknown as typeof import('redis'))
      : ioredisClient();

const store = new RedisStore({
  client,
  prefix: config.storePrefix ?? 'rel:',
  timeoutMs: config.timeoutMs ?? 100,
  onStoreError: config.onStoreError ?? 'local',
  breaker: config.breaker ?? { failures: 3, cooldownMs: 200 },
  denyCache: config.denyCache ?? false,
  instances: config.instances ?? 1,
});
store.on('breaker', (e: BreakerEvent) => send({ type: 'breaker', from: e.from, to: e.to, at: Date.now() }));
let errorsSent = 0;
const storeErrors: Array<[string, number]> = [];
/** A store error's kind: tollgate's code (the deadline), else what Redis or the client said first (CLUSTERDOWN, connect ECONNREFUSED). */
function errorCode(error: unknown): string {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string' && code.startsWith('TG_')) return code;
  return String((error as Error)?.message ?? error).split(/[\s:]/)[0] || 'unknown';
}
store.on('error', (e: StoreErrorEvent) => {
  // Bounded: a long outage (or the soak's hours) must not grow the heap the soak measures.
  if (storeErrors.length < 10_000) storeErrors.push([errorCode(e.error), Date.now()]);
  // The first few in full, then only a count would flood IPC during an outage.
  if (errorsSent++ < 20)
    send({ type: 'store-error', operation: e.operation, message: String((e.error as Error)?.message), at: Date.now() });
});

function rules<R>(): Rule<R>[] {
  return config.rules.map(({ keyBy, ...r }) => {
    const rule = { ...r } as Rule<R>;
    if (keyBy === 'const') rule.key = constant('all');
    else if (keyBy?.startsWith('header:')) rule.key = header(keyBy.slice(7)) as (req: R) => string | undefined;
    return rule;
  });
}

const common = {
  store,
  ...(config.prefix === undefined ? {} : { prefix: config.prefix }),
  ...(config.trustProxy === undefined ? {} : { trustProxy: config.trustProxy }),
};

// A limiter on the same rules and store, so that the app can answer `/peek` from Redis.
const peeker = createLimiter<http.IncomingMessage>({
  rules: rules(),
  store,
  ...(config.prefix === undefined ? {} : { prefix: config.prefix }),
});

/** The plain timer a request's answer is measured against (see LATE_HEADER). */
function watch(): () => string {
  const deadline = config.timeoutMs ?? 100;
  const t0 = performance.now();
  let fired: number | undefined;
  const timer = setTimeout(() => {
    fired = performance.now() - t0;
  }, deadline);
  // A request the client gave up on never clears it: it must not keep a stopping app alive.
  timer.unref();
  return () => {
    clearTimeout(timer);
    // Answered before the timer fired: within the deadline however busy the machine.
    return fired === undefined ? '0' : Math.max(0, performance.now() - t0 - fired).toFixed(1);
  };
}

let close: () => Promise<void>;
let port: number;
if (config.framework === 'express') {
  const app = express();
  // Before the limiter: reading the counters must not consume from them.
  app.get('/peek', async (req, res) => {
    res.json(await peeker.peek(req));
  });
  app.use((_req, res, next) => {
    const late = watch();
    const writeHead = res.writeHead;
    // Every answer, the limiter's refusals (503 under 'deny') included, goes through writeHead.
    res.writeHead = function (this: typeof res, ...args: Parameters<typeof res.writeHead>) {
      this.setHeader(LATE_HEADER, late());
      return writeHead.apply(this, args);
    } as typeof res.writeHead;
    next();
  });
  app.use(rateLimit({ rules: rules(), ...common }));
  app.use((req, res) => {
    if (req.rateLimit?.degraded) res.setHeader(DEGRADED_HEADER, req.rateLimit.degraded);
    res.json({ ok: true });
  });
  const server = http.createServer(app);
  server.keepAliveTimeout = 2000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as { port: number }).port;
  close = async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  };
} else {
  const app = fastify({ keepAliveTimeout: 2000 });
  const watches = new WeakMap<object, () => string>();
  // Added before the plugin: runs before its hook, so the timer starts as the request reaches it.
  app.addHook('onRequest', async (req) => {
    watches.set(req, watch());
  });
  // Every answer, the plugin's refusals included.
  app.addHook('onSend', async (req, reply, payload) => {
    const late = watches.get(req);
    if (late) reply.header(LATE_HEADER, late());
    return payload;
  });
  await app.register(tollgate, { rules: rules(), ...common });
  app.get('/peek', { config: { rateLimit: false } }, async (req) => peeker.peek(req.raw));
  app.all('/*', async (req, reply) => {
    const degraded = (req as { rateLimit?: { degraded?: string } }).rateLimit?.degraded;
    if (degraded) reply.header(DEGRADED_HEADER, degraded);
    return { ok: true };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as { port: number }).port;
  close = () => app.close();
}

function count(list: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of list) out[k] = (out[k] ?? 0) + 1;
  return out;
}

let stopping = false;
process.on('message', async (m) => {
  if (m === 'stats') {
    // Started with --expose-gc (the soak), heap figures are after a full collection.
    (globalThis as { gc?: () => void }).gc?.();
    (globalThis as { gc?: () => void }).gc?.();
    const handles = (process as unknown as { _getActiveHandles(): object[] })._getActiveHandles().map((h) => h.constructor.name);
    const mem = process.memoryUsage();
    send({
      type: 'stats',
      handles: count(handles),
      resources: count(process.getActiveResourcesInfo()),
      rss: mem.rss,
      heapUsed: mem.heapUsed,
      storeErrors,
    });
  } else if (m === 'stop') {
    stopping = true;
    await close();
    await store.close();
    closeClient();
    process.disconnect();
  }
});
// The parent gone means the test is over: never outlive it. After a 'stop' the process
// should already be exiting by itself; if anything keeps it alive, exit 3 says so. 20 s: a
// leak keeps it alive for good, while closing a Cluster client on a machine at load 20 took
// more than 3 s (a passing stop costs only its own time; the parent kills it after 30 s).
process.on('disconnect', () => setTimeout(() => process.exit(stopping ? 3 : 0), 20_000).unref());

send({ type: 'ready', port, pid: process.pid });
