/**
 * Key flood against the memory store (issue 9, item 4; SPEC 6.2), run as a child started
 * with `--expose-gc` so that heap figures are measured after a full collection.
 *
 * `limiter.consume` is driven directly with request-like objects whose socket addresses
 * rotate through `count` distinct clients (three IPv4 then one IPv6, each IPv6 in its own
 * /56: IPv6 key extraction costs about three times an IPv4 one, and the suite's time is
 * bounded), with `maxKeys` far below `count`. Reported: heap after GC at the start, after
 * `maxKeys` keys and at the end; the median CPU time of a 10 000-decision chunk in the first
 * and in the last 100 000; whether recent keys still hold their limit; how many of
 * 10 000 addresses inside one /56 were admitted (one key: exactly the limit).
 */
import { performance } from 'node:perf_hooks';
import { createLimiter, ManualClock, MemoryStore, type RequestLike } from '@tollgate/core';

export interface FloodConfig {
  count: number;
  maxKeys: number;
  limit: number;
}

export interface FloodResult {
  heapStart: number;
  heapAtMaxKeys: number;
  heapEnd: number;
  /** Median CPU ms of a 10 000-decision chunk. */
  firstChunkMedianMs: number;
  lastChunkMedianMs: number;
  admittedInFlood: number;
  recentChecked: number;
  recentHeld: boolean;
  sameSubnetAdmitted: number;
  totalMs: number;
}

const config = JSON.parse(process.argv[2] as string) as FloodConfig;
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('start with --expose-gc');

function heap(): number {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed;
}

/** Client i: IPv4 for three in four, an IPv6 in a /56 of its own for every fourth. */
function address(i: number): string {
  const n = i >>> 2;
  if (i % 4 !== 3) return `${10 + (i % 4)}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
  // 2001:db8:HHHH:LL00::1 — the counter fills bits 33..56, so every client is its own /56.
  return `2001:db8:${((n >>> 8) & 0xffff).toString(16)}:${((n & 0xff) << 8).toString(16)}::1`;
}

const req = (addr: string): RequestLike => ({ headers: {}, socket: { remoteAddress: addr } });
const store = new MemoryStore({ maxKeys: config.maxKeys });
// A still clock: a client's flood request and its checks after the flood fall in one window
// wherever an hour ends (nothing expires within the flood's minute either way).
const limiter = createLimiter({ rules: [{ name: 'ip', limit: config.limit, window: '1h' }], store, clock: new ManualClock(0) });

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] as number;
const CHUNK = 10_000;
const chunks: number[] = [];
const heapStart = heap();
let heapAtMaxKeys = 0;
let admittedInFlood = 0;
const t0 = performance.now();
for (let c = 0; c < config.count; c += CHUNK) {
  // CPU time, not wall time: a busy machine must not make the flood look slow.
  const start = process.cpuUsage();
  for (let i = c; i < c + CHUNK && i < config.count; i++) {
    if ((await limiter.consume(req(address(i)))).allowed) admittedInFlood++;
  }
  const used = process.cpuUsage(start);
  chunks.push((used.user + used.system) / 1000);
  if (heapAtMaxKeys === 0 && c + CHUNK >= config.maxKeys) heapAtMaxKeys = heap();
}
const totalMs = performance.now() - t0;
const perHundredK = 100_000 / CHUNK;

// The most recent clients are present: each already used 1 of `limit`, so exactly
// limit − 1 more are admitted and the next is refused.
const recentChecked = 1000;
let recentHeld = true;
for (let i = config.count - recentChecked; i < config.count; i++) {
  let admitted = 0;
  for (let j = 0; j < config.limit; j++) if ((await limiter.consume(req(address(i)))).allowed) admitted++;
  if (admitted !== config.limit - 1) recentHeld = false;
}

// 10 000 rotating addresses inside 2001:db8:abcd:ef00::/56 are one client.
let sameSubnetAdmitted = 0;
for (let i = 0; i < 10_000; i++) {
  const low = (x: number) => (x & 0xffff).toString(16);
  const a = `2001:db8:abcd:ef${(i & 0xff).toString(16).padStart(2, '0')}:${low(i >>> 8)}:${low(i * 7919)}::${low(i)}`;
  if ((await limiter.consume(req(a))).allowed) sameSubnetAdmitted++;
}

const result: FloodResult = {
  heapStart,
  heapAtMaxKeys,
  heapEnd: heap(),
  firstChunkMedianMs: median(chunks.slice(0, perHundredK)),
  lastChunkMedianMs: median(chunks.slice(-perHundredK)),
  admittedInFlood,
  recentChecked,
  recentHeld,
  sameSubnetAdmitted,
  totalMs,
};
await store.close();
process.send?.(result, () => process.disconnect());
