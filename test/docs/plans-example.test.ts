// examples/plans end to end, through real HTTP: the example's server is started as a child
// process (as a user runs it) on the memory store, and twice on one real redis-server to
// check that a tier change made on one instance reaches the other over pub/sub.
// The example imports the built packages: the test command builds them first.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const built =
  existsSync(join(root, 'packages/express/dist/index.mjs')) &&
  existsSync(join(root, 'packages/redis/dist/index.mjs')) &&
  existsSync(join(root, 'packages/cli/dist/index.mjs'));
const ADMIN = { 'x-admin-token': 'test-admin' };
const stillClock = fileURLToPath(new URL('./still-clock.mjs', import.meta.url));
const run = promisify(execFile);

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});

/**
 * Starts the example server; resolves with its base URL once it prints it. On the memory store
 * its clock stands still (still-clock.mjs): the checked counts hold wherever a minute ends.
 */
function server(env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const preload = env.REDIS_URL === undefined ? ['--import', stillClock] : [];
    const child = spawn(process.execPath, [...preload, 'examples/plans/server.mjs'], {
      cwd: root,
      env: { ...process.env, PORT: '0', ADMIN_TOKEN: 'test-admin', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no URL after 20 s:\n${out}`)), 20_000);
    const read = (chunk: Buffer) => {
      out += chunk;
      const url = /http:\/\/localhost:(\d+)\//.exec(out);
      if (url) {
        clearTimeout(timer);
        resolve(`http://127.0.0.1:${url[1]}`);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.on('exit', (code) => reject(new Error(`exited with ${code}:\n${out}`)));
  });
}

interface Reply {
  status: number;
  policy: string | null;
  rateLimit: string | null;
  retryAfter: string | null;
  body: Record<string, unknown>;
}

async function call(
  base: string,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: unknown } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, {
    method: init.method ?? 'GET',
    headers,
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  const text = await res.text();
  return {
    status: res.status,
    policy: res.headers.get('ratelimit-policy'),
    rateLimit: res.headers.get('ratelimit'),
    retryAfter: res.headers.get('retry-after'),
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}

const api = (base: string, apiKey: string) => call(base, '/api/reports', { headers: { 'x-api-key': apiKey } });
/** The `q=` of the named rule in RateLimit-Policy. */
const quota = (r: Reply, rule: string) => Number(new RegExp(`"${rule}";q=(\\d+)`).exec(r.policy ?? '')?.[1]);
const remaining = (r: Reply, rule: string) => Number(new RegExp(`"${rule}";r=(\\d+)`).exec(r.rateLimit ?? '')?.[1]);

describe.skipIf(!built)('examples/plans', { timeout: 60_000 }, () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.destroy();
  });

  // On Redis the example decides on Redis time, which no test can stop: a Redis test starts at
  // least 13 s before a minute ends (one takes up to 7 s on a busy machine), so its requests
  // share the example's one-minute windows (two straddling a window's end would both count less).
  beforeEach(async (ctx) => {
    if (!`${ctx.task.suite?.name ?? ''} ${ctx.task.name}`.includes('Redis')) return;
    const into = Date.now() % 60_000;
    if (into > 47_000) await new Promise((r) => setTimeout(r, 60_000 - into + 250));
  });

  let prefixes = 0;
  const STORES = [
    { name: 'memory store', env: () => ({}) },
    { name: 'Redis', env: () => ({ REDIS_URL: `redis://127.0.0.1:${redis.port}`, REDIS_PREFIX: `plans${++prefixes}:` }) },
  ];

  describe.each(STORES)('$name', ({ env }) => {
    it('a free tenant is refused after 5 and blocked; pro gets more; headers name the tier and the limit applied', async () => {
      const base = await server(env());
      const free: Reply[] = [];
      for (let i = 0; i < 6; i++) free.push(await api(base, 'acme-key'));
      expect(free.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
      expect(quota(free[0] as Reply, 'free')).toBe(5);
      expect(quota(free[0] as Reply, 'ip')).toBe(1000);
      expect(free[0]?.body).toMatchObject({ tenant: 'acme', plan: 'free', limit: 5, remaining: 4 });
      const refused = free[5] as Reply;
      expect(refused.retryAfter).toBe('300'); // blockFor: 5 minutes
      expect(refused.body['violated-policies']).toEqual(['free']);

      const pro: Reply[] = [];
      for (let i = 0; i < 20; i++) pro.push(await api(base, 'globex-key'));
      expect(pro.every((r) => r.status === 200)).toBe(true);
      expect(quota(pro[0] as Reply, 'pro')).toBe(50);
      expect(remaining(pro[19] as Reply, 'pro')).toBe(30);
      expect(pro[0]?.policy).not.toContain('"free"');

      const enterprise = await api(base, 'initech-key');
      expect(enterprise.status).toBe(200);
      expect(quota(enterprise, 'enterprise')).toBe(200);

      // Signed out: only the ip rule applies, and the route answers 401.
      const anonymous = await call(base, '/api/reports');
      expect(anonymous.status).toBe(401);
      expect(anonymous.policy).toBe('"ip";q=1000;w=60');
    });

    it('the admin API needs its token, unblocks and resets a tenant, raises a negotiated limit and a tier limit', async () => {
      const base = await server(env());
      expect((await call(base, '/admin/keys/free/acme')).status).toBe(401);
      expect((await call(base, '/admin/keys/free/acme', { headers: { 'x-admin-token': 'wrong' } })).status).toBe(401);
      expect((await call(base, '/admin/tiers/free', { method: 'PUT', body: { limit: 1000 } })).status).toBe(401);

      for (let i = 0; i < 6; i++) await api(base, 'acme-key');
      const blocked = await call(base, '/admin/keys/free/acme', { headers: ADMIN });
      expect(blocked.body).toMatchObject({ rule: 'free', key: 'acme', blocked: true, remaining: 0, limit: 5 });

      // Unblock lifts the block, not the minute's count: still refused, by the limit now.
      const unblocked = await call(base, '/admin/keys/free/acme/unblock', { method: 'POST', headers: ADMIN });
      expect(unblocked.body).toMatchObject({ blocked: false });
      // Reset: a full budget at once.
      expect((await call(base, '/admin/keys/free/acme/reset', { method: 'POST', headers: ADMIN })).status).toBe(200);
      const back = await api(base, 'acme-key');
      expect(back.status).toBe(200);
      expect(remaining(back, 'free')).toBe(4);

      // The enterprise tenant's negotiated limit is read per request from the database.
      const before = await api(base, 'initech-key');
      expect(quota(before, 'enterprise')).toBe(200);
      const raised = await call(base, '/admin/tenants/initech/quota', { method: 'PUT', headers: ADMIN, body: { limit: 500 } });
      expect(raised.status).toBe(200);
      const after = await api(base, 'initech-key');
      expect(quota(after, 'enterprise')).toBe(500);
      expect(remaining(after, 'enterprise')).toBe(498); // what it had used is kept
      // An operator reads the tenant's state with its negotiated limit, not a placeholder.
      const state = await call(base, '/admin/keys/enterprise/initech', { headers: ADMIN });
      expect(state.status).toBe(200);
      expect(state.body).toMatchObject({ rule: 'enterprise', limit: 500, remaining: 498 });
      expect((await call(base, '/admin/tenants/initech/quota', { method: 'PUT', headers: ADMIN, body: { limit: 0 } })).status).toBe(400);

      // A tier's limit, with update: every free tenant, keeping what it used.
      const tier = await call(base, '/admin/tiers/free', { method: 'PUT', headers: ADMIN, body: { limit: 8 } });
      expect(tier.body).toEqual({ rule: 'free', limit: 8 });
      const free8 = await api(base, 'acme-key');
      expect(quota(free8, 'free')).toBe(8);
      expect(remaining(free8, 'free')).toBe(6);
      const bad = await call(base, '/admin/tiers/free', { method: 'PUT', headers: ADMIN, body: { limit: 0 } });
      expect(bad.status).toBe(400);
      expect(bad.body.code).toBe('TG_INVALID_LIMIT');
      expect((await call(base, '/admin/tiers/gold', { method: 'PUT', headers: ADMIN, body: { limit: 9 } })).body.code).toBe(
        'TG_UNKNOWN_RULE',
      );
      expect(quota(await api(base, 'acme-key'), 'free')).toBe(8);
    });

    it('a tenant moved to a higher plan keeps what it used in the window', async () => {
      const base = await server(env());
      for (let i = 0; i < 5; i++) expect((await api(base, 'acme-key')).status).toBe(200);
      // Not blocked yet (5 of 5 used, none refused): move acme to pro.
      expect((await call(base, '/admin/tenants/acme/plan', { method: 'PUT', headers: ADMIN, body: { plan: 'pro' } })).status).toBe(200);
      const pro = await api(base, 'acme-key');
      expect(pro.status).toBe(200);
      expect(quota(pro, 'pro')).toBe(50);
      expect(remaining(pro, 'pro')).toBe(44); // 5 used on free + this one
      expect((await call(base, '/admin/tenants/acme/plan', { method: 'PUT', headers: ADMIN, body: { plan: 'gold' } })).status).toBe(400);
    });

    it('a block carries over to the new plan (one group), and an upgrade lifts it; a downgrade does not', async () => {
      const base = await server(env());
      for (let i = 0; i < 6; i++) await api(base, 'acme-key');
      expect((await api(base, 'acme-key')).status).toBe(429); // blocked on free
      await call(base, '/admin/tenants/acme/plan', { method: 'PUT', headers: ADMIN, body: { plan: 'enterprise' } });
      const upgraded = await api(base, 'acme-key');
      expect(upgraded.status).toBe(200);
      expect(remaining(upgraded, 'enterprise')).toBe(194); // tenants without a negotiated limit: the default 200
      // Back on free: over its limit, refused and blocked again; moving down to free keeps the block.
      await call(base, '/admin/tenants/acme/plan', { method: 'PUT', headers: ADMIN, body: { plan: 'free' } });
      const down = await api(base, 'acme-key');
      expect(down.status).toBe(429);
      expect(down.retryAfter).toBe('300');
    });
  });

  it("on Redis, an operator's `tollgate keys` reaches the example's state: get shows the block, unblock lifts it", async () => {
    const env = { REDIS_URL: `redis://127.0.0.1:${redis.port}`, REDIS_PREFIX: 'plans-cli:' };
    const base = await server(env);
    for (let i = 0; i < 6; i++) await api(base, 'acme-key');
    const rule = [
      '--prefix',
      'plans-cli:',
      '--rule',
      'free',
      '--limit',
      '5',
      '--window',
      '1m',
      '--group',
      'plan',
      '--key',
      'acme',
      '--json',
    ];
    const cli = async (op: string) => {
      const { stdout } = await run(process.execPath, ['packages/cli/bin/tollgate.js', 'keys', op, '--redis', env.REDIS_URL, ...rule], {
        cwd: root,
      });
      return JSON.parse(stdout) as { redisKey: string; state: { blocked: boolean; remaining: number } };
    };
    const got = await cli('get');
    expect(got.redisKey).toBe('plans-cli:tg:plan:w60000{acme}');
    expect(got.state).toMatchObject({ blocked: true, remaining: 0 });
    expect((await cli('unblock')).state.blocked).toBe(false);
    // The app sees it: no longer blocked (the admin API reads the same state).
    expect((await call(base, '/admin/keys/free/acme', { headers: ADMIN })).body).toMatchObject({ blocked: false });
    await cli('reset');
    // The app's RedisStore remembers a refusal locally for at most a second (its deny
    // cache, docs/operations.md): a change made elsewhere is seen within that bound.
    // Judged by when each request was sent, not by how long the answers took on a busy machine:
    // one sent a second after the reset (the refusal was cached before it) must be admitted.
    const since = Date.now();
    let status = 0;
    for (let tries = 0; tries < 100 && status !== 200; tries++) {
      const sentAt = Date.now();
      status = (await api(base, 'acme-key')).status;
      if (sentAt - since >= 1000) expect(status).toBe(200);
      if (status !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(200);
  });

  it('on Redis, a tier change made on one instance reaches the other over pub/sub', async () => {
    const shared = { REDIS_URL: `redis://127.0.0.1:${redis.port}`, REDIS_PREFIX: 'plans-two:' };
    const [a, b] = await Promise.all([server(shared), server(shared)]);
    for (let i = 0; i < 3; i++) expect((await api(a, 'acme-key')).status).toBe(200);
    // One budget in Redis: b sees what a used.
    expect(remaining(await api(b, 'acme-key'), 'free')).toBe(1);
    expect((await call(a, '/admin/tiers/free', { method: 'PUT', headers: ADMIN, body: { limit: 20 } })).status).toBe(200);
    let seen = 0;
    for (let i = 0; i < 100 && seen !== 20; i++) {
      seen = quota(await api(b, 'acme-key'), 'free');
      if (seen !== 20) await new Promise((r) => setTimeout(r, 20));
    }
    expect(seen).toBe(20);
  });
});
