import { createLimiter } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Redis } from 'ioredis';

const client = new Redis({ lazyConnect: true });
const store = new RedisStore({ client, prefix: 'app:', timeoutMs: 50, onStoreError: 'allow' });
export const limiter = createLimiter<{ ip: string }>({ rules: [{ name: 'ip', key: (r) => r.ip, rate: '5/s' }], store });
export const closed: Promise<void> = store.close();
