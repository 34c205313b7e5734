/**
 * The store conformance suite for RedisStore, on whatever client a test file started
 * (standalone or Cluster). Every store call must reach Redis: a failing call would be
 * answered by the local fallback, which decides like MemoryStore and could hide a broken
 * script. After each test no key of the suite may be left without an expiry.
 */
import type { ManualClock } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import type { Cluster, Redis } from 'ioredis';
import { expect } from 'vitest';
import { keysWithoutExpiry } from '../setup/redis.js';
import { keyOpsContract } from './key-ops-contract.js';
import { storeContract } from './store-contract.js';

/**
 * `client` is the client under test (any client RedisStore takes); `admin` an ioredis
 * client on the same servers, which inspects the keys.
 */
export function redisStoreContract(name: string, prefix: string, client: () => object, admin: () => Redis | Cluster): void {
  const failures: unknown[] = [];
  const factory = (clock: ManualClock) => {
    const store = new RedisStore({ client: client(), prefix, clock, timeoutMs: 2000 });
    store.on('error', (e) => failures.push(e));
    return store;
  };
  const options = {
    afterEach: async () => {
      expect(failures.splice(0)).toEqual([]);
      expect(await keysWithoutExpiry(admin(), `${prefix}*`)).toEqual([]);
    },
  };
  storeContract(name, factory, options);
  keyOpsContract(name, factory, options);
}
