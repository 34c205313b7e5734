// The six algorithms deciding the same burst on a virtual clock: 30 requests arrive
// 50 ms apart against "10 per second". Run: pnpm demo:burst (from the repository root).
import { constant, createLimiter, ManualClock, MemoryStore } from '@tollgate/core';

const policies = [
  { name: 'fixed-window', algorithm: 'fixed-window' },
  { name: 'sliding-log', algorithm: 'sliding-log' },
  { name: 'sliding-window', algorithm: 'sliding-window' },
  { name: 'token-bucket', algorithm: 'token-bucket' },
  { name: 'leaky-meter', algorithm: 'leaky-bucket' },
  { name: 'leaky-queue', algorithm: 'leaky-bucket', mode: 'queue', queue: 5 },
  { name: 'sliding-buckets', algorithm: 'sliding-buckets' },
];

const arrivals = Array.from({ length: 30 }, (_, i) => 700 + i * 50);
console.log('30 requests, one every 50 ms from t=700 ms, limit 10 per second\n');
console.log(`${'policy'.padEnd(15)} timeline (. admitted, ~ delayed, x rejected)   admitted`);
for (const p of policies) {
  const clock = new ManualClock(0);
  const store = new MemoryStore({ clock });
  const { name, ...rule } = p;
  const limiter = createLimiter({ rules: [{ name, key: constant('demo'), limit: 10, window: '1s', ...rule }], store, clock });
  let line = '';
  let admitted = 0;
  for (const t of arrivals) {
    clock.set(t);
    const d = await limiter.consume({});
    if (d.allowed) admitted++;
    line += d.allowed ? (d.delayMs > 0 ? '~' : '.') : 'x';
  }
  console.log(`${name.padEnd(15)} ${line}   ${String(admitted).padStart(2)}`);
  await store.close();
}
