/**
 * The function library on a Cluster when one master loses it (issue 19): the library is
 * loaded on every master when the store starts, but a master can lose it later on its own
 * — `FUNCTION FLUSH` on that node, or a restart without persistence — while the client
 * stays connected to the Cluster. The FCALL routed there answers `ERR` (function not
 * found); the store must load the library on that master and go on deciding in Redis,
 * counting the failed call once. Real three-master Clusters, on every client the store
 * takes (ioredis `Cluster`, node-redis 5 and 6 `createCluster`).
 */
import { createLimiter, type Decision, type Limiter } from '@tollgate/core';
import { RedisStore, STORE_LIBRARY_NAME } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBE_TIMEOUT_MS } from '../../packages/redis/src/script.js';
import { CLIENTS, type Connected } from '../setup/clients.js';
import { type RedisCluster, type RedisServer, rawCommand, startCluster } from '../setup/redis.js';

const LIMIT = 5;
/** Keys spread over the three masters (each its own hash tag, so its own slot). */
const KEYS = Array.from({ length: 12 }, (_, i) => `k${i}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let cluster: RedisCluster;
beforeAll(async () => {
  cluster = await startCluster();
});
afterAll(async () => {
  await cluster?.destroy();
});

/** The master serving the slot of hash tag `{key}`: the one that answers without MOVED. */
async function ownerOf(key: string): Promise<RedisServer> {
  for (const n of cluster.nodes) if (!(await rawCommand(n.port, `GET {${key}}`)).startsWith('-MOVED')) return n;
  throw new Error(`no node owns {${key}}`);
}

/** Whether master `n` has this build's library (asked by a client of its own). */
async function hasLibrary(n: RedisServer): Promise<boolean> {
  const admin = new Redis({ port: n.port, host: '127.0.0.1' });
  try {
    return ((await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', STORE_LIBRARY_NAME)) as unknown[]).length === 1;
  } finally {
    admin.disconnect();
  }
}

async function clusterOk(): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const states = await Promise.all(cluster.nodes.map((n) => rawCommand(n.port, 'CLUSTER INFO').catch(() => '')));
    if (states.every((s) => /cluster_state:ok/.test(s))) return;
    if (Date.now() > deadline) throw new Error('cluster not ok again');
    await sleep(50);
  }
}

describe.each(CLIENTS)('Cluster on $name: one master loses the function library', (kind) => {
  let c: Connected;
  let n = 0;
  beforeAll(async () => {
    c = await kind.cluster(cluster.startupNodes.map((x) => x.port));
  });
  afterAll(() => c.close());

  function limiter(timeoutMs = 2000): { l: Limiter<string>; store: RedisStore; errors: unknown[] } {
    const store = new RedisStore({
      client: c.client,
      prefix: `reload:${kind.name.replace(/\W/g, '')}:${n++}:`,
      timeoutMs,
      denyCache: false,
    });
    const errors: unknown[] = [];
    store.on('error', (e) => errors.push(e));
    // sliding-log: the counts are exact wherever an hour ends among the reloads and restarts (a
    // sliding-window counter's estimate of the previous hour drops across its end).
    const rules = [{ name: 'r', key: (k: string) => k, algorithm: 'sliding-log' as const, limit: LIMIT, window: '1h' as const }];
    return { l: createLimiter({ rules, store }), store, errors };
  }

  it('FUNCTION FLUSH on one master: reloaded there, every key decided in Redis, the failed call counted once', async () => {
    const { l, store, errors } = limiter();
    for (const k of KEYS) expect((await l.consume(k)).degraded).toBeUndefined();
    const victim = await ownerOf(KEYS[0] as string);
    expect(await rawCommand(victim.port, 'FUNCTION FLUSH')).toMatch(/^\+OK/);
    expect(await hasLibrary(victim)).toBe(false);
    const ds = await Promise.all(KEYS.map((k) => l.consume(k)));
    expect(ds.map((d) => d.degraded)).toEqual(KEYS.map(() => undefined));
    // Two consumes of each key so far, each counted once (the one that met the missing
    // library ran nothing and was retried).
    expect(ds.map((d) => d.rules[0]?.remaining)).toEqual(KEYS.map(() => LIMIT - 2));
    expect(errors).toEqual([]);
    expect(await hasLibrary(victim)).toBe(true);
    for (const node of cluster.nodes) expect(await hasLibrary(node)).toBe(true);
    await store.close();
  });

  it('bug: a master that stopped answering held up reloading the library on another, so decisions there timed out', async () => {
    const { l, store, errors } = limiter(3000);
    for (const k of KEYS) expect((await l.consume(k)).degraded).toBeUndefined();
    const flushed = await ownerOf(KEYS[0] as string);
    const silent = cluster.nodes.find((x) => x !== flushed) as RedisServer;
    const key = KEYS.find((k) => k !== KEYS[0]) as string;
    expect(await rawCommand(flushed.port, 'FUNCTION FLUSH')).toMatch(/^\+OK/);
    silent.pause();
    let d: Decision;
    const asked = Date.now();
    try {
      // Well within the Cluster's node timeout (5 s): the paused master is not failed over.
      d = await l.consume(KEYS[0] as string);
    } finally {
      silent.resume();
    }
    const took = Date.now() - asked;
    expect(d.degraded).toBeUndefined();
    expect(d.rules[0]?.remaining).toBe(LIMIT - 2);
    // The choice waited for the silent master at most PROBE_TIMEOUT_MS (plus slack).
    expect(took).toBeLessThan(PROBE_TIMEOUT_MS + 1500);
    expect(errors).toEqual([]);
    expect(await hasLibrary(flushed)).toBe(true);
    expect((await l.consume(key)).degraded).toBeUndefined();
    await store.close();
  });

  it('a master restarted (its data and library gone with the process): decisions return to Redis on it, the library reloaded there', async () => {
    const { l, store } = limiter();
    for (const k of KEYS) expect((await l.consume(k)).degraded).toBeUndefined();
    const victim = await ownerOf(KEYS[0] as string);
    const onVictim = new Set<string>();
    for (const k of KEYS) if ((await ownerOf(k)) === victim) onVictim.add(k);
    await victim.stop();
    await victim.start();
    expect(await hasLibrary(victim)).toBe(false);
    await clusterOk();
    // Decided in Redis again on the restarted master within a bounded time (the client
    // reconnects to it; the first FCALL there finds no library and loads it).
    const deadline = Date.now() + 15_000;
    let back = false;
    while (!back && Date.now() < deadline) {
      back = (await l.peek(KEYS[0] as string)).degraded === undefined;
      if (!back) await sleep(50);
    }
    expect(back).toBe(true);
    const ds = await Promise.all(KEYS.map((k) => l.consume(k)));
    expect(ds.map((d) => d.degraded)).toEqual(KEYS.map(() => undefined));
    // Keys on the restarted master start again (no persistence); the others kept their count.
    expect(ds.map((d) => d.rules[0]?.remaining)).toEqual(KEYS.map((k) => (onVictim.has(k) ? LIMIT - 1 : LIMIT - 2)));
    expect(await hasLibrary(victim)).toBe(true);
    await store.close();
  }, 60_000);
});
