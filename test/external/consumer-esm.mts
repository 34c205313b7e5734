// TypeScript consumer (ESM, node16 resolution): the declarations resolve and type-check.
import { createLimiter, type Decision, ManualClock } from '@tollgate/core';

const clock = new ManualClock(0);
const limiter = createLimiter<{ id: string }>({ rules: [{ name: 'ts', key: (r) => r.id, rate: '10/s' }], clock });
const d: Promise<Decision> = limiter.consume({ id: 'a' });
void d;
