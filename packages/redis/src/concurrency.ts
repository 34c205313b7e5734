/**
 * `RedisSlotStore`: concurrency slots shared by every instance, as leases.
 *
 * One sorted set per slot key: members are request ids, scores the time their lease
 * expires. One Lua script does each operation atomically (EVALSHA; on a `NOSCRIPT`
 * reply, and only then, EVAL once):
 *
 * - `acquire`: drop expired leases, then add `id` with expiry `now + lease` iff fewer
 *   than `max` remain (re-acquiring a held id only reports it);
 * - `renew`: push a held lease's expiry to `now + lease`; report whether it was held;
 * - `count`: drop expired leases and count the rest.
 *
 * Every write sets the key's TTL to the latest lease expiry, so a key never outlives its
 * leases and an instance that dies without releasing (a crash, a kill) leaks nothing:
 * its leases stop being renewed and lapse within one lease. `release` is a plain ZREM
 * (Redis deletes a sorted set when its last member goes).
 *
 * Time comes from Redis (`TIME`) so instances with skewed clocks agree; a `clock` may be
 * supplied for tests.
 */
import { createHash } from 'node:crypto';
import { type Clock, type SlotGrant, type SlotStore, TollgateError, unknownOptionFix } from '@tollgate/core';
import { portOf, type RedisPort, replyCode } from './client.js';
import { clientError, optionError } from './errors.js';

/** The client the slot store takes: the same clients as RedisStore's (see client.ts). */
export type SlotClientLike = object;

export interface RedisSlotStoreOptions {
  /** An ioredis / iovalkey or node-redis client or cluster you built and connected (optional peer dependencies). */
  client: SlotClientLike;
  /**
   * Prepended to every slot key the concurrency limit names (`<prefix><key>`).
   * @default ''
   */
  prefix?: string;
  /**
   * `'redis'` reads time inside the script; a `Clock` (tests) passes its time in.
   * @default 'redis'
   */
  clock?: 'redis' | Clock;
  /**
   * Deadline of every call in ms: a slow or absent Redis never makes a request hang.
   * @default 1000
   */
  timeoutMs?: number;
}

/** The script behind acquire, renew and count. KEYS[1] slot key; ARGV op, id, max, lease, now. */
export const SLOT_SCRIPT = `
local key = KEYS[1]
local op, id = ARGV[1], ARGV[2]
local max, lease = tonumber(ARGV[3]), tonumber(ARGV[4])
local now = tonumber(ARGV[5])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- A lease whose expiry has come is gone.
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local function keep_ttl()
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIRE', key, math.max(1, math.ceil(tonumber(last[2]) - now))) end
end
if op == 'acquire' then
  local n = redis.call('ZCARD', key)
  if redis.call('ZSCORE', key, id) then return {1, n} end
  if n >= max then return {0, n} end
  redis.call('ZADD', key, now + lease, id)
  keep_ttl()
  return {1, n + 1}
elseif op == 'renew' then
  if not redis.call('ZSCORE', key, id) then return {0, redis.call('ZCARD', key)} end
  redis.call('ZADD', key, 'XX', now + lease, id)
  keep_ttl()
  return {1, redis.call('ZCARD', key)}
end
return {0, redis.call('ZCARD', key)}
`;

export const SLOT_SCRIPT_SHA = createHash('sha1').update(SLOT_SCRIPT).digest('hex');

/**
 * Concurrency slots in Redis, for `createConcurrency({ store })` and the adapters'
 * `concurrency({ store })`.
 * @example
 * app.use(concurrency({ max: 3, global: 200, store: new RedisSlotStore({ client: redis }) }));
 */
export class RedisSlotStore implements SlotStore {
  readonly leases = true;
  readonly shared = true;
  readonly #port: RedisPort;
  readonly #prefix: string;
  readonly #clock: Clock | undefined;
  readonly #timeoutMs: number;
  #closed = false;

  constructor(options: RedisSlotStoreOptions) {
    const { client, prefix = '', clock = 'redis', timeoutMs = 1000, ...rest } = options ?? ({} as RedisSlotStoreOptions);
    const unknown = Object.keys(rest)[0];
    if (unknown !== undefined) {
      throw optionError(
        `RedisSlotStore.${unknown}`,
        'client, prefix, clock or timeoutMs',
        unknown,
        unknownOptionFix(unknown, ['client', 'prefix', 'clock', 'timeoutMs'], 'Remove the option.'),
        'TG_UNKNOWN_OPTION',
      );
    }
    const port = portOf(client);
    if (port === undefined) throw clientError('RedisSlotStore', client);
    if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
      throw optionError('RedisSlotStore.prefix', 'a string without braces', prefix, 'Use e.g. "myapp:".');
    }
    if (clock !== 'redis' && typeof clock?.now !== 'function') {
      throw optionError('RedisSlotStore.clock', "'redis' or a Clock", clock, 'Pass new ManualClock() in tests.');
    }
    if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw optionError('RedisSlotStore.timeoutMs', 'a positive number of ms', timeoutMs, 'Use e.g. 1000.');
    }
    this.#port = port;
    this.#prefix = prefix;
    this.#clock = clock === 'redis' ? undefined : clock;
    this.#timeoutMs = timeoutMs;
  }

  #deadline<T>(p: Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(new TollgateError('TG_STORE_CLOSED', 'RedisSlotStore: used after close().'));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(new TollgateError('TG_STORE_TIMEOUT', `RedisSlotStore: Redis did not answer within timeoutMs (${this.#timeoutMs} ms).`)),
        this.#timeoutMs,
      );
      timer.unref();
    });
    return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
  }

  #run(op: 'acquire' | 'renew' | 'count', key: string, id: string, max: number, leaseMs: number): Promise<[number, number]> {
    const args = [op, id, String(max), String(leaseMs), this.#clock === undefined ? '' : String(this.#clock.now())];
    const k = this.#prefix + key;
    const keys = [k];
    const call = this.#port.evalsha(SLOT_SCRIPT_SHA, keys, args).catch((err: unknown) => {
      if (replyCode(err) !== 'NOSCRIPT') throw err;
      return this.#port.eval(SLOT_SCRIPT, keys, args);
    });
    return this.#deadline(call).then((reply) => {
      const [ok, n] = reply as [number, number];
      return [Number(ok), Number(n)];
    });
  }

  async acquire(key: string, id: string, max: number, leaseMs: number): Promise<SlotGrant> {
    const [ok, n] = await this.#run('acquire', key, id, max, leaseMs);
    return { acquired: ok === 1, inFlight: n };
  }

  async release(key: string, id: string): Promise<void> {
    const k = this.#prefix + key;
    await this.#deadline(this.#port.command(['ZREM', k, id], k));
  }

  async renew(key: string, id: string, leaseMs: number): Promise<boolean> {
    const [ok] = await this.#run('renew', key, id, 0, leaseMs);
    return ok === 1;
  }

  async count(key: string): Promise<number> {
    const [, n] = await this.#run('count', key, '', 0, 0);
    return n;
  }

  /** Stops using the client (which stays yours to quit). */
  close(): Promise<void> {
    this.#closed = true;
    return Promise.resolve();
  }
}
