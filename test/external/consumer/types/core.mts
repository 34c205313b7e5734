import { createLimiter, type Decision, ManualClock, MemoryStore, TollgateError } from '@tollgate/core';

const clock = new ManualClock(0);
const store = new MemoryStore({ clock });
const limiter = createLimiter<{ id: string }>({
  rules: [
    { name: 'user', key: (r) => r.id, rate: '10/s' },
    { name: 'burst', key: (r) => r.id, algorithm: 'token-bucket', rate: '100/min', burst: 20 },
  ],
  store,
  clock,
});
export const decided: Promise<Decision> = limiter.consume({ id: 'a' });
export const isCoded = (err: unknown): string | undefined => (err instanceof TollgateError ? err.code : undefined);
