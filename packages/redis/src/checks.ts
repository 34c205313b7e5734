/**
 * What `RedisStore` checks when it connects (docs/distributed.md, "Settings that keep
 * counts"): configuration that silently lets a limit be exceeded, reported as a coded
 * warning (`process.emitWarning` and `tollgate:redis:warning`), never thrown.
 *
 * - `maxmemory-policy` other than `noeviction`: Redis evicts counters under memory
 *   pressure (every limiter key has a TTL, so `volatile-*` evicts them too), and an
 *   exhausted key comes back with a full budget.
 * - a supplied clock more than a second away from Redis `TIME`: instances deciding on
 *   Redis time and this one disagree about every window.
 *
 * `CONFIG GET` may be refused (managed services, renamed commands, ACLs) and the client may
 * never connect: either is quiet. The checks run once the client is ready; a Cluster is
 * checked on every master. They go through the client port (client.ts), so they run on
 * every client the store takes: ioredis, iovalkey and node-redis alike.
 */
import type { Clock } from '@tollgate/core';
import { redisChannels } from './channels.js';
import type { RedisPort } from './client.js';
import type { RedisWarningCode } from './errors.js';

/** The one eviction policy under which Redis never drops a limiter's key. */
const SAFE_POLICY = 'noeviction';
/** How far a supplied clock may be from Redis `TIME` (beyond the round trip) before a warning. */
export const CLOCK_SKEW_MS = 1000;

/** Message on `tollgate:redis:warning`. */
export interface RedisWarningMessage {
  store: object;
  code: RedisWarningCode;
  message: string;
  /** The offending policy (`TOLLGATE_REDIS_EVICTION_POLICY`). */
  policy?: string;
  /** The supplied clock minus Redis `TIME`, in ms (`TOLLGATE_REDIS_CLOCK_SKEW`). */
  skewMs?: number;
}

/** A coded process warning, also published on `tollgate:redis:warning`. */
export function warn(m: RedisWarningMessage): void {
  process.emitWarning(m.message, { type: 'TollgateWarning', code: m.code });
  if (redisChannels.warning.hasSubscribers) redisChannels.warning.publish(m);
}

/** The value of a `CONFIG GET <name>` reply (RESP2 array or RESP3 map). */
function configValue(reply: unknown, name: string): string | undefined {
  if (Array.isArray(reply)) {
    const i = reply.indexOf(name);
    return i >= 0 && typeof reply[i + 1] === 'string' ? (reply[i + 1] as string) : undefined;
  }
  if (reply instanceof Map) return typeof reply.get(name) === 'string' ? reply.get(name) : undefined;
  if (typeof reply === 'object' && reply !== null) {
    const v = (reply as Record<string, unknown>)[name];
    return typeof v === 'string' ? v : undefined;
  }
  return undefined;
}

async function checkPolicy(store: object, nodes: readonly RedisPort[]): Promise<void> {
  const policies = await Promise.all(
    nodes.map((n) =>
      n.command(['CONFIG', 'GET', 'maxmemory-policy']).then(
        (r) => configValue(r, 'maxmemory-policy'),
        () => undefined,
      ),
    ),
  );
  const policy = policies.find((p) => p !== undefined && p !== SAFE_POLICY);
  if (policy === undefined) return;
  warn({
    store,
    code: 'TOLLGATE_REDIS_EVICTION_POLICY',
    policy,
    message:
      `RedisStore: Redis runs with maxmemory-policy ${policy}. Under memory pressure it evicts rate-limit counters ` +
      `(every one has a TTL, so volatile-* policies evict them too) and an exhausted client gets a fresh budget. ` +
      `Use maxmemory-policy noeviction for the limiter's Redis; see docs/distributed.md.`,
  });
}

async function checkClock(store: object, node: RedisPort, clock: Clock): Promise<void> {
  const before = clock.now();
  const reply = await node.command(['TIME']);
  const after = clock.now();
  if (!Array.isArray(reply)) return;
  const redisMs = Number(reply[0]) * 1000 + Number(reply[1]) / 1000;
  const skewMs = (before + after) / 2 - redisMs;
  if (!(Math.abs(skewMs) > CLOCK_SKEW_MS + Math.abs(after - before) / 2)) return;
  warn({
    store,
    code: 'TOLLGATE_REDIS_CLOCK_SKEW',
    skewMs: Math.round(skewMs),
    message:
      `RedisStore: the supplied clock is ${Math.round(skewMs)} ms away from Redis TIME. Instances on Redis time and this ` +
      `one disagree about every window, which can admit up to twice a limit. Supplied clocks are for tests: omit ` +
      `the clock option to decide on Redis time.`,
  });
}

/**
 * Runs the checks once the client is connected; the promise never rejects. Returns a
 * function that cancels a check still waiting for the client to be ready, or still waiting
 * for its replies (settling the promise).
 */
export function checkOnConnect(store: object, port: RedisPort, clock: Clock | undefined): { done: Promise<void>; cancel: () => void } {
  let cancel = () => {};
  const done = new Promise<void>((resolve) => {
    const run = (): void => {
      port
        .masters()
        .then((nodes) => {
          const first = nodes[0];
          const checks = [checkPolicy(store, nodes)];
          if (clock !== undefined && first !== undefined) checks.push(checkClock(store, first, clock));
          return Promise.all(checks.map((p) => p.catch(() => undefined)));
        })
        .then(
          () => resolve(),
          () => resolve(),
        );
    };
    cancel = () => resolve();
    // Once the client is ready: a Cluster knows its masters only then, and a client built
    // with lazyConnect is not connected by the store's checks.
    if (port.connected?.() !== false || port.onReconnect === undefined) {
      run();
      return;
    }
    const off = port.onReconnect(() => {
      off();
      run();
    });
    cancel = () => {
      off();
      resolve();
    };
  });
  return { done, cancel };
}
