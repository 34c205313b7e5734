/**
 * `tollgate keys` against a real redis-server (and a real Redis Cluster) started by this
 * file: an application's limiter on a RedisStore and the command line operate on the same
 * keys, on Redis time. The rule comes from flags or from a config file; `--json` output is
 * asserted field by field; failures are coded with their exit codes.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createLimiter, ip, type RequestLike, type Rule } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, type RedisCluster, type RedisServer, rawCommand, startCluster, startRedis } from '../../../test/setup/redis.js';
import { cli } from './helpers.js';

const bin = fileURLToPath(new URL('../bin/tollgate.js', import.meta.url));
const exec = promisify(execFile);
const req = (addr: string) => ({ headers: {}, socket: { remoteAddress: addr } });
let n = 0;

describe('standalone', () => {
  let server: RedisServer;
  let client: Redis;
  let url: string;

  beforeAll(async () => {
    server = await startRedis();
    client = new Redis({ port: server.port, host: '127.0.0.1' });
    url = `redis://127.0.0.1:${server.port}`;
  });

  afterAll(async () => {
    client.disconnect();
    await server.destroy();
  });

  /**
   * An application's limiter of `rules`, on the store prefix `prefix` (Redis time). Without
   * a deny cache: an instance's cached refusal outlives a change made elsewhere by up to
   * DENY_CACHE_MAX_AGE_MS (packages/redis/test/store.test.ts), which these tests would wait for.
   */
  function app(rules: Rule[], prefix: string) {
    const store = new RedisStore({ client, prefix, timeoutMs: 2000, denyCache: false });
    return { limiter: createLimiter({ rules, store }), store };
  }

  async function keys(args: string[], files: Record<string, string> = {}) {
    const r = await cli(['keys', ...args, '--redis', url, '--json'], files);
    return { ...r, json: JSON.parse(r.stdout() || 'null') };
  }

  it('get, block, unblock, penalize, reward and reset act on the keys the application uses', async () => {
    const prefix = `cli${++n}:`;
    // sliding-log: its counts are exact wherever a minute boundary falls among the CLI's runs,
    // which take seconds (a sliding-window counter's estimate drops across one).
    const { limiter, store } = app([{ name: 'ip', rate: '5/min', algorithm: 'sliding-log' }], prefix);
    const flags = ['--prefix', prefix, '--rule', 'ip', '--rate', '5/min', '--algorithm', 'sliding-log', '--key', '203.0.113.7'];
    await limiter.consume(req('203.0.113.7'));
    await limiter.consume(req('203.0.113.7'));

    const got = await keys(['get', ...flags]);
    expect(got.code).toBe(0);
    expect(got.json).toMatchObject({
      command: 'keys',
      operation: 'get',
      redisKey: `${prefix}tg:ip:s60000{203.0.113.7}`,
      state: { rule: 'ip', key: '203.0.113.7', limit: 5, windowMs: 60_000, remaining: 3, exists: true, blocked: false },
    });

    const blocked = await keys(['block', ...flags, '--for', '1h']);
    expect(blocked.json.state).toMatchObject({ blocked: true, remaining: 0 });
    expect(blocked.json.state.blockedUntil - blocked.json.state.at).toBe(3_600_000);
    const d = await limiter.consume(req('203.0.113.7'));
    expect(d.rules[0]?.reason).toBe('blocked');
    expect(d.retryAfterMs).toBeGreaterThan(3_590_000);
    expect((await limiter.consume(req('203.0.113.8'))).allowed).toBe(true);

    expect((await keys(['unblock', ...flags])).json.state).toMatchObject({ blocked: false, remaining: 3 });
    expect((await limiter.consume(req('203.0.113.7'))).allowed).toBe(true);

    expect((await keys(['penalize', ...flags, '--units', '10'])).json.state).toMatchObject({ remaining: 0 });
    expect((await limiter.consume(req('203.0.113.7'))).rules[0]?.reason).toBe('limit');
    expect((await keys(['reward', ...flags, '--units', '2'])).json.state).toMatchObject({ remaining: 2 });

    const reset = await keys(['reset', ...flags]);
    expect(reset.json).toMatchObject({ operation: 'reset', state: { remaining: 5, exists: false } });
    expect((await limiter.peek(req('203.0.113.7'))).rules[0]?.remaining).toBe(4);
    await store.close();
  });

  it('a sliding-buckets rule: --buckets names its blocks, which are part of the key', async () => {
    const prefix = `cli${++n}:`;
    // Blocks of 10 s: the first leaves the window a minute after it began, long after this test.
    const { limiter, store } = app([{ name: 'ip', rate: '5/min', algorithm: 'sliding-buckets', buckets: 6 }], prefix);
    const flags = ['--prefix', prefix, '--rule', 'ip', '--rate', '5/min', '--algorithm', 'sliding-buckets', '--key', '203.0.113.7'];
    await limiter.consume(req('203.0.113.7'));
    await limiter.consume(req('203.0.113.7'));
    const got = await keys(['get', ...flags, '--buckets', '6']);
    expect(got.json).toMatchObject({ redisKey: `${prefix}tg:ip:b60000n6{203.0.113.7}`, state: { remaining: 3, exists: true } });
    // Other blocks are another rule's state.
    expect((await keys(['get', ...flags])).json.state).toMatchObject({ remaining: 5, exists: false });
    expect((await keys(['penalize', ...flags, '--buckets', '6', '--units', '10'])).json.state).toMatchObject({ remaining: 0 });
    expect((await limiter.consume(req('203.0.113.7'))).rules[0]?.reason).toBe('limit');
    expect((await keys(['reward', ...flags, '--buckets', '6', '--units', '2'])).json.state).toMatchObject({ remaining: 2 });
    expect((await limiter.peek(req('203.0.113.7'))).rules[0]?.remaining).toBe(1);
    await store.close();
  });

  it('reset refused by Redis (an ACL without DEL) is TG_CLI_REDIS_FAILED with exit code 3, not "done"; the key stays blocked', async () => {
    const prefix = `cli${++n}:`;
    const { limiter, store } = app([{ name: 'ip', rate: '5/min' }], prefix);
    expect(await rawCommand(server.port, 'ACL SETUSER cli-no-del on >no-del ~* &* +@all -del')).toMatch(/^\+OK/);
    const flags = ['--prefix', prefix, '--rule', 'ip', '--rate', '5/min', '--key', '203.0.113.7'];
    await limiter.block('ip', '203.0.113.7', '1h');
    const r = await cli(['keys', 'reset', ...flags, '--redis', `redis://cli-no-del:no-del@127.0.0.1:${server.port}`]);
    expect(r.code).toBe(3);
    expect(r.stdout()).not.toMatch(/done/);
    expect(r.stderr()).toMatch(/TG_CLI_REDIS_FAILED[\s\S]*NOPERM/);
    expect((await limiter.get('ip', '203.0.113.7')).blocked).toBe(true);
    await store.close();
  });

  it('Redis frozen (CLIENT PAUSE): penalize exits 3 saying it may have been applied; the retry with --id charges once either way', async () => {
    const prefix = `cli${++n}:`;
    // sliding-log: the 40 units count in full for a minute after the penalty, wherever a minute
    // boundary falls among the reads (a sliding-window counter's estimate drops across one).
    const { limiter, store } = app([{ name: 'ip', rate: '100/min', algorithm: 'sliding-log' }], prefix);
    const flags = [
      '--prefix',
      prefix,
      '--rule',
      'ip',
      '--rate',
      '100/min',
      '--algorithm',
      'sliding-log',
      '--key',
      '203.0.113.9',
      '--units',
      '40',
      '--id',
      'freeze-1',
    ];
    expect(await rawCommand(server.port, 'CLIENT PAUSE 10000 WRITE')).toMatch(/^\+OK/);
    let r: Awaited<ReturnType<typeof cli>>;
    try {
      r = await cli(['keys', 'penalize', ...flags, '--redis', url, '--timeout', '200']);
    } finally {
      expect(await rawCommand(server.port, 'CLIENT UNPAUSE')).toMatch(/^\+OK/);
    }
    expect(r.code).toBe(3);
    expect(r.stdout()).not.toMatch(/done/);
    expect(r.stderr()).toMatch(/TG_CLI_REDIS_FAILED[\s\S]*may have been applied[\s\S]*--id/);
    // Whether Redis ran it depends on whether it read the command before the CLI hung up:
    // either way, the retry with the same --id leaves the key charged once.
    expect([60, 100]).toContain((await limiter.get('ip', '203.0.113.9')).remaining);
    expect((await keys(['penalize', ...flags])).json.state.remaining).toBe(60);
    await store.close();
  });

  it('--id: a penalize repeated with the same id is applied once', async () => {
    const prefix = `cli${++n}:`;
    // sliding-log: the penalty counts in full for a minute, wherever a minute boundary falls among the runs.
    const { limiter, store } = app([{ name: 'ip', rate: '100/min', algorithm: 'sliding-log' }], prefix);
    const flags = [
      '--prefix',
      prefix,
      '--rule',
      'ip',
      '--rate',
      '100/min',
      '--algorithm',
      'sliding-log',
      '--key',
      '203.0.113.7',
      '--units',
      '40',
    ];
    expect((await keys(['penalize', ...flags, '--id', 'incident-7'])).json.state.remaining).toBe(60);
    expect((await keys(['penalize', ...flags, '--id', 'incident-7'])).json.state.remaining).toBe(60);
    expect((await limiter.get('ip', '203.0.113.7')).remaining).toBe(60);
    const bad = await keys(['get', '--prefix', prefix, '--rule', 'ip', '--rate', '100/min', '--key', 'k', '--id', 'x']);
    expect(bad.code).toBe(2);
    await store.close();
  });

  it('a rule from a config file, with the limiter prefix, blockFor and an IPv6 address folded as ip() folds it', async () => {
    const prefix = `cli${++n}:`;
    const rules: Rule<RequestLike>[] = [
      { name: 'ip', rate: '100/min', key: ip({ ipv6Subnet: 64 }) },
      // A window from the key's first request: the three attempts are in one window wherever a
      // clock-aligned quarter hour would end (there, the third would open a fresh one and pass).
      {
        name: 'login',
        limit: 2,
        window: '15m',
        algorithm: 'fixed-window',
        align: 'first-request',
        blockFor: '1h',
        key: ip({ ipv6Subnet: 64 }),
      },
    ];
    const store = new RedisStore({ client, prefix, timeoutMs: 2000, denyCache: false });
    const limiter = createLimiter({ rules, store, prefix: 'shop' });
    for (let i = 0; i < 3; i++) await limiter.consume(req('2001:db8:1:2::7'));
    expect((await limiter.consume(req('2001:db8:1:2::99'))).rules[1]?.reason).toBe('blocked');
    const config = [
      'rules:',
      '  - { name: ip, rate: 100/min }',
      '  - { name: login, limit: 2, window: 15m, algorithm: fixed-window, align: first-request, blockFor: 1h }',
    ].join('\n');
    const args = [
      '--prefix',
      prefix,
      '--limiter-prefix',
      'shop',
      '-c',
      'rules.yaml',
      '--rule',
      'login',
      '--ip',
      '2001:db8:1:2::1',
      '--ipv6-subnet',
      '64',
    ];
    const got = await keys(['get', ...args], { 'rules.yaml': config });
    expect(got.json.state).toMatchObject({ rule: 'login', key: '2001:db8:1:2::/64', blocked: true, remaining: 0 });
    expect(got.json.redisKey).toBe(`${prefix}shop:login:fa900000{2001:db8:1:2::/64}`);
    await keys(['unblock', ...args], { 'rules.yaml': config });
    await keys(['reward', ...args, '--units', '1'], { 'rules.yaml': config });
    expect((await limiter.consume(req('2001:db8:1:2::5'))).allowed).toBe(true);
    await store.close();
  });

  it('prints the state for people without --json', async () => {
    const r = await cli([
      'keys',
      'block',
      '--redis',
      url,
      '--prefix',
      `cli${++n}:`,
      '--rule',
      'ip',
      '--rate',
      '5/min',
      '--key',
      'k',
      '--for',
      '90s',
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout()).toContain('block: done');
    expect(r.stdout()).toMatch(/remaining\s+0 of 5/);
    expect(r.stdout()).toMatch(/blocked\s+until \d{4}-\d\d-\d\dT.*\(1m 30s\)/);
  });

  it('bad usage is a coded error with exit code 2 (in the --json output too); nothing reaches Redis', async () => {
    const base = ['--rule', 'ip', '--rate', '5/min', '--key', 'k'];
    const cases: [string[], string][] = [
      [['frobnicate', ...base], 'TG_CLI_INVALID_ARGUMENT'],
      [['get', '--rule', 'ip', '--key', 'k'], 'TG_CLI_INVALID_ARGUMENT'],
      [['get', '--rate', '5/min', '--key', 'k'], 'TG_CLI_INVALID_ARGUMENT'],
      [['get', '--rule', 'ip', '--rate', '5/min'], 'TG_CLI_INVALID_ARGUMENT'],
      [['get', ...base, '--ip', '1.2.3.4'], 'TG_CLI_INVALID_ARGUMENT'],
      [['get', '--rule', 'ip', '--rate', '5/min', '--ip', 'not-an-ip'], 'TG_INVALID_OPTION'],
      [['block', ...base], 'TG_CLI_INVALID_ARGUMENT'],
      [['block', ...base, '--for', 'forever'], 'TG_INVALID_DURATION'],
      [['penalize', ...base, '--units', '-3'], 'TG_CLI_INVALID_ARGUMENT'],
      [['reward', ...base, '--units', '0'], 'TG_INVALID_UNITS'],
      [['get', '--rule', 'ip', '--rate', '5/min', '-a', 'fixed', '--key', 'k'], 'TG_CLI_INVALID_ARGUMENT'],
      [['get', '--rule', 'ip', '--rate', '0/min', '--key', 'k'], 'TG_INVALID_RATE'],
      [['get', ...base, '--bogus'], 'TG_CLI_INVALID_ARGUMENT'],
      // bug: a repeated option kept its last value silently (--key k --key other acted on other)
      [['block', ...base, '--key', 'other', '--for', '1h'], 'TG_CLI_INVALID_ARGUMENT'],
      [['get', ...base, '--rate', '50/min'], 'TG_CLI_INVALID_ARGUMENT'],
      // bug: an option the operation does not take was dropped silently (get --units 5 read the key, exit 0)
      [['get', ...base, '--units', '5'], 'TG_CLI_INVALID_ARGUMENT'],
      [['block', ...base, '--for', '1h', '--units', '5'], 'TG_CLI_INVALID_ARGUMENT'],
      [['penalize', ...base, '--units', '5', '--for', '1h'], 'TG_CLI_INVALID_ARGUMENT'],
      [['unblock', ...base, '--for', '1h'], 'TG_CLI_INVALID_ARGUMENT'],
      [['get', ...base, '--ipv6-subnet', '64'], 'TG_CLI_INVALID_ARGUMENT'],
    ];
    const before = Number(/keys=(\d+)/.exec(await client.info('keyspace'))?.[1] ?? 0);
    for (const [args, code] of cases) {
      const r = await keys(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.json?.error?.code, args.join(' ')).toBe(code);
    }
    const r = await keys(['get', '--rule', 'login', '-c', 'r.yaml', '--key', 'k'], { 'r.yaml': 'rules:\n  - { name: ip, rate: 5/min }' });
    expect(r.json.error.code).toBe('TG_CLI_INVALID_ARGUMENT');
    expect(r.json.error.message).toContain('(ip)');
    expect(Number(/keys=(\d+)/.exec(await client.info('keyspace'))?.[1] ?? 0)).toBe(before);
  });

  it('an unreachable Redis is TG_CLI_REDIS_FAILED with exit code 3', async () => {
    const port = await freePort();
    const r = await cli([
      'keys',
      'get',
      '--redis',
      `redis://127.0.0.1:${port}`,
      '--rule',
      'ip',
      '--rate',
      '5/min',
      '--key',
      'k',
      '--timeout',
      '300',
      '--json',
    ]);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout()).error.code).toBe('TG_CLI_REDIS_FAILED');
  });

  it('the real command (bin/tollgate.js on the built package, a child process) blocks a key the application then refuses', async () => {
    const prefix = `cli${++n}:`;
    const { limiter, store } = app([{ name: 'ip', rate: '5/min' }], prefix);
    const { stdout, stderr } = await exec(process.execPath, [
      bin,
      'keys',
      'block',
      '--redis',
      url,
      '--prefix',
      prefix,
      '--rule',
      'ip',
      '--rate',
      '5/min',
      '--ip',
      '::ffff:198.51.100.4',
      '--for',
      '10m',
      '--json',
    ]);
    expect(stderr).toBe('');
    expect(JSON.parse(stdout).state).toMatchObject({ key: '198.51.100.4', blocked: true });
    expect((await limiter.consume(req('198.51.100.4'))).rules[0]?.reason).toBe('blocked');
    await store.close();
  });

  it('keys --help and help keys print the usage', async () => {
    for (const argv of [
      ['keys', '--help'],
      ['help', 'keys'],
      ['keys', 'get', '--help'],
    ]) {
      const r = await cli(argv);
      expect(r.code).toBe(0);
      expect(r.stdout()).toContain('Usage: tollgate keys <get|reset|block|unblock|penalize|reward>');
    }
  });
});

describe('Cluster', () => {
  let cluster: RedisCluster;
  let client: Cluster;

  beforeAll(async () => {
    cluster = await startCluster();
    client = new Cluster(cluster.startupNodes);
    await client.ping();
  });

  afterAll(async () => {
    client.disconnect();
    await cluster.destroy();
  });

  it('--cluster reaches the slot of the key, with and without a hash tag', async () => {
    const prefix = `clc${++n}:`;
    const store = new RedisStore({ client, prefix, timeoutMs: 2000, denyCache: false });
    const tagged = new RedisStore({ client, prefix, timeoutMs: 2000, denyCache: false, hashTag: (_r, k) => k.split(':')[0] as string });
    // sliding-log: exact wherever a minute boundary falls among the CLI's runs, which take seconds.
    const plain = createLimiter({
      rules: [{ name: 'user', key: (r: { u: string }) => r.u, limit: 4, window: '1m', algorithm: 'sliding-log' }],
      store,
    });
    const byTenant = createLimiter({ rules: [{ name: 'tenant', key: (r: { u: string }) => r.u, limit: 4, window: '1m' }], store: tagged });
    await plain.consume({ u: 'alice' });
    await byTenant.consume({ u: 'acme:bob' });
    const seeds = cluster.startupNodes.flatMap((s) => ['--redis', `redis://127.0.0.1:${s.port}`]);
    const a = await cli([
      'keys',
      'penalize',
      '--cluster',
      ...seeds,
      '--prefix',
      prefix,
      '--rule',
      'user',
      '--limit',
      '4',
      '--window',
      '1m',
      '--algorithm',
      'sliding-log',
      '--key',
      'alice',
      '--units',
      '1',
      '--json',
    ]);
    expect(a.code).toBe(0);
    expect(JSON.parse(a.stdout()).state.remaining).toBe(2);
    const b = await cli([
      'keys',
      'block',
      '--cluster',
      ...seeds,
      '--prefix',
      prefix,
      '--hash-tag',
      'acme',
      '--rule',
      'tenant',
      '--limit',
      '4',
      '--window',
      '1m',
      '--key',
      'acme:bob',
      '--for',
      '5m',
      '--json',
    ]);
    expect(JSON.parse(b.stdout()).state).toMatchObject({ remaining: 0, blocked: true });
    expect((await byTenant.consume({ u: 'acme:bob' })).rules[0]?.reason).toBe('blocked');
    expect((await plain.peek({ u: 'alice' })).rules[0]?.remaining).toBe(1);
    await store.close();
    await tagged.close();
  });
});
