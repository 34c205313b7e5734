/**
 * `tollgate compare --lease` against a real redis-server started by this file: the leased
 * runs' figures are checked against the leases' guarantee (docs/distributed.md, "Leases"),
 * computed from the requests' times, never against numbers written down; and the leased
 * runs are checked to have decided from leases (far fewer Redis calls than decisions).
 */
import { busiest, type RequestRecord } from '@tollgate/cli';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, type RedisServer, rawCommand, startRedis } from '../../../test/setup/redis.js';
import { cli } from './helpers.js';

interface PolicyJson {
  name: string;
  summary: { admitted: number };
  requests: RequestRecord[];
  shortened: { intervalMs: number; count: number };
  leased: {
    summary: { admitted: number };
    shortened: { intervalMs: number; count: number };
    difference: number;
    requests: RequestRecord[];
  };
}

/** Units admitted in each clock-aligned window of `windowMs`, by departure. */
function perWindow(records: readonly RequestRecord[], windowMs: number): number[] {
  const out: number[] = [];
  for (const r of records) {
    if (r.departure === null) continue;
    const k = Math.floor(r.departure / windowMs);
    out[k] = (out[k] ?? 0) + r.cost;
  }
  return out.filter((n) => n !== undefined);
}

/** Script calls (FCALL or EVALSHA) the server has run so far. */
async function scriptCalls(port: number): Promise<number> {
  const stats = await rawCommand(port, 'INFO commandstats');
  let calls = 0;
  for (const m of stats.matchAll(/cmdstat_(fcall|fcall_ro|evalsha|eval):calls=(\d+)/g)) calls += Number(m[2]);
  return calls;
}

describe('tollgate compare --lease', () => {
  let server: RedisServer;
  let url: string;

  beforeAll(async () => {
    server = await startRedis();
    url = `redis://127.0.0.1:${server.port}`;
  });

  afterAll(async () => {
    await server.destroy();
  });

  it('leased decisions across four instances keep every algorithm within its guarantee and within instances × max of exact', async () => {
    const L = 100;
    const W = 10_000;
    const ttl = 1000;
    const instances = 4;
    const max = 20;
    const algorithms = 'fixed-window,sliding-log,sliding-window,token-bucket,leaky-meter,sliding-buckets,leaky-queue';
    // Three times the limit, then a burst far above it after a quiet spell.
    const r = await cli([
      'compare',
      '-a',
      algorithms,
      '--limit',
      String(L),
      '--window',
      '10s',
      '-p',
      'poisson 30/s for 25s seed 2',
      '-p',
      'poisson 2/s for 10s from 25s seed 3',
      '-p',
      'poisson 200/s for 2s from 35s seed 4',
      '--instances',
      String(instances),
      '--lease',
      `max=${max},ttl=1s`,
      '--redis',
      url,
      '--json',
    ]);
    expect(r.stderr()).not.toContain('tollgate:');
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout());
    expect(j.lease).toEqual({ max, ttlMs: ttl, instances });
    const policies = j.policies as PolicyJson[];
    expect(policies.map((p) => p.name)).toEqual(algorithms.split(','));
    for (const p of policies) {
      const exact = p.summary.admitted;
      const leased = p.leased.summary.admitted;
      expect(p.leased.difference, p.name).toBe(leased - exact);
      // Across all instances no more is admitted than Redis counted; the most units held unused is instances × max.
      expect(leased, p.name).toBeLessThanOrEqual(exact + instances * max);
      expect(leased, p.name).toBeGreaterThan(0);
      expect(p.leased.requests.length).toBe(p.requests.length);
      // Every request was decided by one of the instances, and each of them decided some.
      expect(new Set(p.leased.requests.map((q) => q.instance))).toEqual(new Set([0, 1, 2, 3]));
      expect(p.requests.every((q) => q.instance === undefined)).toBe(true);
      expect(p.leased.shortened.intervalMs).toBe(W - ttl);
      expect(p.leased.shortened.count).toBe(busiest(p.leased.requests, W - ttl).count);
    }
    const by = Object.fromEntries(policies.map((p) => [p.name, p]));
    // A fixed window and a sliding window's current window: at most L per clock-aligned window, as without leases.
    for (const name of ['fixed-window', 'sliding-window']) {
      const windows = perWindow(by[name]!.leased.requests, W);
      expect(windows.length, name).toBeGreaterThanOrEqual(4);
      expect(Math.max(...windows), name).toBeLessThanOrEqual(L);
    }
    // A fixed window admits exactly L in a window whose arrivals exceed it.
    expect(perWindow(by['fixed-window']!.leased.requests, W)[0]).toBe(L);
    // A sliding log: at most L in any W - ttl.
    expect(by['sliding-log']!.leased.shortened.count).toBeLessThanOrEqual(L);
    // Sliding buckets: a lease ends with its block, so L in any W - one block, as without leases.
    expect(busiest(by['sliding-buckets']!.leased.requests, W - W / 10).count).toBeLessThanOrEqual(L);
    // Buckets: at most B + r·(T + ttl) in any T.
    for (const name of ['token-bucket', 'leaky-meter']) {
      for (const T of [1000, 2000, 5000, W, 3 * W]) {
        const bound = L + (L / W) * (T + ttl);
        expect(busiest(by[name]!.leased.requests, T).count, `${name} in ${T} ms`).toBeLessThanOrEqual(bound);
      }
    }
    // A leaky-bucket queue never leases: every request decided as exactly.
    const queue = by['leaky-queue']!;
    expect(queue.leased.requests.map((q) => [q.decision, q.delayMs])).toEqual(queue.requests.map((q) => [q.decision, q.delayMs]));
  }, 120_000);

  it('the leased run decides from leases: far fewer Redis calls than its decisions', async () => {
    const before = await scriptCalls(server.port);
    // Far from the limit (1000 per 10 s at 50/s): every decision is an admission, exact or leased.
    const r = await cli([
      'compare',
      '-a',
      'sliding-log',
      '-r',
      '1000/10s',
      '-p',
      'poisson 50/s for 20s',
      '--instances',
      '2',
      '--lease',
      'max=20,ttl=1s',
      '--redis',
      url,
      '--json',
    ]);
    expect(r.code).toBe(0);
    const calls = (await scriptCalls(server.port)) - before;
    const [p] = JSON.parse(r.stdout()).policies as PolicyJson[];
    const n = p!.requests.length;
    expect(n).toBeGreaterThan(800);
    expect(p!.summary.admitted).toBe(n);
    expect(p!.leased.summary.admitted).toBe(n);
    // The exact run makes one call per decision; the leased one (leases, give-backs) a fraction of that.
    expect(calls).toBeGreaterThanOrEqual(n);
    expect(calls - n).toBeLessThan(n / 4);
  }, 60_000);

  it('prints exact and leased side by side, and draws both runs of each policy', async () => {
    const r = await cli([
      'compare',
      '-a',
      'sliding-log,token-bucket',
      '-r',
      '10/10s',
      '-p',
      'poisson 3/s for 20s',
      '--instances',
      '3',
      '--lease',
      'max=5,ttl=1s',
      '--redis',
      url,
      '--svg',
      'l.svg',
    ]);
    expect(r.code).toBe(0);
    const out = r.stdout();
    expect(out).toContain('3 instances (each request at one drawn at random), lease max 5, ttl 1 s');
    expect(out).toMatch(/policy\s+run\s+admitted\s+rejected\s+vs exact\s+max in 10 s\s+max in 9 s/);
    expect(out).toMatch(/sliding-log\s+exact\s+\d+/);
    expect(out).toMatch(/\n\s+leased\s+\d+\s+\d+\s+(0|[+-]\d+ \([+-]\d+\.\d %\))\s+\d+\s+\d+\n/);
    const svg = r.written.get('l.svg') as string;
    expect(svg.match(/class="pt"/g)).toHaveLength(4);
    expect(svg).toContain('sliding-log 10 per 10 s: exact');
    expect(svg).toContain('sliding-log 10 per 10 s: leased');
  }, 60_000);

  it('a ttl above a tenth of a window is the store configuration error, exit code 2', async () => {
    const r = await cli([
      'compare',
      '-a',
      'sliding-log',
      '-r',
      '10/10s',
      '-p',
      'burst 5',
      '--lease',
      'max=5,ttl=2s',
      '--redis',
      url,
      '--json',
    ]);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout()).error).toMatchObject({ code: 'TG_INVALID_OPTION', path: 'RedisStore.lease.ttl' });
  });

  it('an unreachable Redis is TG_CLI_REDIS_FAILED with exit code 3', async () => {
    const port = await freePort();
    const r = await cli(['compare', '-r', '10/s', '-p', 'burst 5', '--lease', 'max=5,ttl=100ms', '--redis', `redis://127.0.0.1:${port}`]);
    expect(r.code).toBe(3);
    expect(r.stderr()).toContain('TG_CLI_REDIS_FAILED');
  });

  it.each([
    [['--lease', 'max=5,ttl=1s'], '--lease', /--redis with --lease/],
    [['--redis', 'redis://127.0.0.1:1'], '--redis', /--redis only with --lease/],
    [['--instances', '4'], '--instances', /--instances only with --lease/],
    [['--lease', 'max=5', '--redis', 'redis://127.0.0.1:1'], '--lease', /without ttl/],
    [['--lease', 'max=0,ttl=1s', '--redis', 'redis://127.0.0.1:1'], '--lease', /max=0/],
    [['--lease', 'max=5,ttl=1s,size=3', '--redis', 'redis://127.0.0.1:1'], '--lease', /"size=3"/],
    [['--lease', 'max=5,ttl=1s', '--instances', '0', '--redis', 'redis://127.0.0.1:1'], '--instances', /from 1 to 1000/],
  ])('%j is a usage error (TG_CLI_INVALID_ARGUMENT, exit code 2) before any Redis is reached', async (extra, path, message) => {
    const r = await cli(['compare', '-r', '10/s', '-p', 'burst 5', ...extra, '--json']);
    expect(r.code).toBe(2);
    const { error } = JSON.parse(r.stdout());
    expect(error).toMatchObject({ code: 'TG_CLI_INVALID_ARGUMENT', path });
    expect(error.message).toMatch(message);
  });
});
