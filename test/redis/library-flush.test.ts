/**
 * Several instances on one Redis when the function library disappears (`FUNCTION FLUSH`, a
 * restart without persistence): every instance's calls in flight meet "Function not found"
 * at once, one of them reloads the library, and the others find it already there. Each
 * must retry its call rather than count it as a store failure: no decision is answered by
 * the failure policy (`'deny'` here, so a policy answer would be a 503) and no breaker
 * opens. Three stores, each on its own client, on a standalone server and on a Cluster,
 * with every client family the store takes.
 */
import { createLimiter, type Decision, type Limiter } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENTS, type ClientKind, type Connected } from '../setup/clients.js';
import { type RedisCluster, type RedisServer, rawCommand, startCluster, startRedis } from '../setup/redis.js';

const INSTANCES = 3;
const FLUSHES = 16;
/** Decisions each instance has in flight at any time. */
const IN_FLIGHT = 4;
/** Decisions answered between two flushes (so every flush meets calls in flight). */
const BETWEEN = 24;
const KEYS = Array.from({ length: 16 }, (_, i) => `k${i}`);

interface Instance {
  readonly c: Connected;
  readonly store: RedisStore;
  readonly l: Limiter<string>;
  readonly errors: unknown[];
  readonly breaker: string[];
}

async function instances(connect: () => Promise<Connected>, prefix: string): Promise<Instance[]> {
  const out: Instance[] = [];
  for (let i = 0; i < INSTANCES; i++) {
    const c = await connect();
    // A generous deadline: what is tested is the reload, not the machine's speed.
    const store = new RedisStore({ client: c.client, prefix, timeoutMs: 5000, onStoreError: 'deny', denyCache: false });
    const errors: unknown[] = [];
    const breaker: string[] = [];
    store.on('error', (e) => errors.push(e.error));
    store.on('breaker', (e) => breaker.push(`${e.from}->${e.to}`));
    const l = createLimiter({ rules: [{ name: 'r', key: (k: string) => k, limit: 1_000_000, window: '1h' }], store });
    out.push({ c, store, l, errors, breaker });
  }
  return out;
}

/**
 * Every instance keeps IN_FLIGHT decisions going while the library is flushed FLUSHES
 * times (on every master), each flush after BETWEEN more decisions were answered; bounded
 * by counts, never by wall time.
 */
async function flushUnderLoad(all: Instance[], flush: () => Promise<void>): Promise<Decision[]> {
  const decisions: Decision[] = [];
  let stop = false;
  let answered = 0;
  let waiter: (() => void) | undefined;
  let waitFor = 0;
  let failed = false;
  const worker = async (inst: Instance, w: number) => {
    for (let i = 0; !stop && !failed; i++) {
      const d = await inst.l.consume(KEYS[(w + i) % KEYS.length] as string);
      decisions.push(d);
      // A policy answer is already the failure; it comes without I/O, so it ends the run
      // rather than spin on answers that never yield to the flushes.
      if (d.degraded !== undefined) failed = true;
      if ((++answered >= waitFor || failed) && waiter) {
        const go = waiter;
        waiter = undefined;
        go();
      }
    }
  };
  const workers = all.flatMap((inst) => Array.from({ length: IN_FLIGHT }, (_, w) => worker(inst, w)));
  const more = () =>
    new Promise<void>((r) => {
      if (failed) return r();
      waitFor = answered + BETWEEN;
      waiter = r;
    });
  try {
    for (let f = 0; f < FLUSHES && !failed; f++) {
      await more();
      if (!failed) await flush();
    }
    await more();
  } finally {
    stop = true;
    await Promise.all(workers);
  }
  return decisions;
}

function expectAllInRedis(all: Instance[], decisions: Decision[]): void {
  expect(decisions.filter((d) => d.degraded !== undefined).length).toBe(0);
  expect(decisions.length).toBeGreaterThan(FLUSHES * BETWEEN);
  expect(decisions.every((d) => d.allowed)).toBe(true);
  for (const inst of all) {
    expect(inst.errors.map(String)).toEqual([]);
    expect(inst.breaker).toEqual([]);
    expect(inst.store.breakerState).toBe('closed');
  }
}

async function closeAll(all: Instance[]): Promise<void> {
  for (const inst of all) {
    await inst.store.close();
    await inst.c.close();
  }
}

describe('standalone', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server?.destroy();
  });

  describe.each(CLIENTS)('$name', (kind: ClientKind) => {
    it(`${INSTANCES} instances, FUNCTION FLUSH ${FLUSHES} times under load: no decision goes to the failure policy, no breaker opens`, async () => {
      const all = await instances(() => kind.standalone(server.port), `flush:${kind.name.replace(/\W/g, '')}:`);
      try {
        const decisions = await flushUnderLoad(all, async () => {
          expect(await rawCommand(server.port, 'FUNCTION FLUSH')).toMatch(/^\+OK/);
        });
        expectAllInRedis(all, decisions);
      } finally {
        await closeAll(all);
      }
    }, 60_000);
  });
});

describe('Cluster', () => {
  let cluster: RedisCluster;
  beforeAll(async () => {
    cluster = await startCluster();
  });
  afterAll(async () => {
    await cluster?.destroy();
  });

  describe.each(CLIENTS)('$name', (kind: ClientKind) => {
    it(`${INSTANCES} instances, FUNCTION FLUSH on every master ${FLUSHES} times under load: no decision goes to the failure policy, no breaker opens`, async () => {
      const ports = cluster.nodes.map((n) => n.port);
      const all = await instances(() => kind.cluster(ports), `flushc:${kind.name.replace(/\W/g, '')}:`);
      try {
        const decisions = await flushUnderLoad(all, async () => {
          for (const port of ports) expect(await rawCommand(port, 'FUNCTION FLUSH')).toMatch(/^\+OK/);
        });
        expectAllInRedis(all, decisions);
      } finally {
        await closeAll(all);
      }
    }, 60_000);
  });
});
