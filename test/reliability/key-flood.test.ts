/**
 * Key floods (issue 9, item 4; SPEC 5, 6.2): 1 000 000 distinct client addresses (IPv4 and
 * IPv6 rotating) against the memory store with `maxKeys: 100 000`, in a child process with
 * `--expose-gc` (helpers/flood.ts). The heap stays under a stated bound and stops growing
 * once the store is full, a decision costs the same at the end as at the start, the keys
 * present still hold their limits, and IPv6 addresses rotating inside one /56 are one key.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runChild } from './helpers/children.js';
import type { FloodConfig, FloodResult } from './helpers/flood.js';

const MB = 1024 * 1024;
/** Stated bound for 100 000 states plus the limiter: measured ≈ 11 MB (docs/reliability.md). */
const HEAP_BOUND = 64 * MB;
/** Growth allowed from a full store to the end of the flood (900 000 more clients). */
const GROWTH_AFTER_FULL = 16 * MB;

describe('1 000 000 distinct clients against MemoryStore({ maxKeys: 100 000 })', () => {
  it('bounded heap, flat latency, limits hold for present keys, one key per IPv6 /56', async () => {
    const config: FloodConfig = { count: 1_000_000, maxKeys: 100_000, limit: 5 };
    const r = await runChild<FloodResult>(fileURLToPath(new URL('./helpers/flood.ts', import.meta.url)), config, ['--expose-gc']);
    const mb = (n: number) => `${(n / MB).toFixed(1)} MB`;
    console.log(
      `[flood] ${config.count} clients in ${(r.totalMs / 1000).toFixed(1)} s; heap ${mb(r.heapStart)} → ${mb(r.heapAtMaxKeys)} at maxKeys → ${mb(r.heapEnd)}; ` +
        `median CPU per 10k ${r.firstChunkMedianMs.toFixed(1)} ms (first 100k) vs ${r.lastChunkMedianMs.toFixed(1)} ms (last 100k); ` +
        `same /56 admitted ${r.sameSubnetAdmitted}`,
    );
    expect(r.heapEnd - r.heapStart).toBeLessThan(HEAP_BOUND);
    expect(r.heapEnd - r.heapAtMaxKeys).toBeLessThan(GROWTH_AFTER_FULL);
    // Flat: the last 100k decide no slower than the first 100k, within noise (median chunks).
    expect(r.lastChunkMedianMs).toBeLessThan(r.firstChunkMedianMs * 2.5 + 5);
    // Every client is new in the flood, so every one was admitted.
    expect(r.admittedInFlood).toBe(config.count);
    expect(r.recentHeld).toBe(true);
    expect(r.sameSubnetAdmitted).toBe(config.limit);
  }, 120_000);
});
