/**
 * `RedisSlotStore`: concurrency slots shared by every instance, as leases.
 *
 * One sorted set per slot key: members are request ids, scores the time their lease
 * expires. One server-side call does each operation atomically (the library's slots
 * function, or its script where functions are missing; see script.ts):
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
import { type Clock, type SlotGrant, type SlotStore, TollgateError, unknownOptionFix } from '@tollgate/core';
import { portOf, type RedisPort } from './client.js';
import { clientError, optionError } from './errors.js';
import { runnerOf, SLOTS_CODE } from './script.js';

export { SLOT_SCRIPT, SLOT_SCRIPT_SHA } from './lua/slots.js';

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
    runnerOf(port).prepare();
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
    const call = runnerOf(this.#port).call(SLOTS_CODE, [k], args);
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
