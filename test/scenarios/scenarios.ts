/**
 * The HTTP scenario suite: one set of scenarios that every adapter
 * runs unchanged, so Express and Fastify cannot drift apart.
 *
 * An adapter supplies `makeApp(spec)`: build an app from the adapter-neutral
 * {@link AppSpec} and listen on 127.0.0.1 (port 0). The suite then talks to it over real
 * sockets (the client address matters: some scenarios connect from 127.0.0.2, .3, ...)
 * and drives time with the spec's ManualClock.
 *
 * Contract for `makeApp`:
 * - app-level rules: `spec.rules` with `store`, `clock`, `trustProxy`, `headers`, `dryRun`;
 * - each `spec.routes` entry answers `method path` with status 200 and the JSON body
 *   `{ route: path, rateLimit: req.rateLimit ?? null }`; its `rules` are added to the
 *   app-level ones (Express `limiter.route({ rules })`, Fastify `config.rateLimit.rules`);
 * - `GET /` always exists (app-level rules only) with the same body;
 * - the HTTP server accepts request headers up to `spec.maxHeaderSize` bytes.
 *
 * A `ListeningApp` may bring its own `send` (Fastify's `app.inject`, with `from` as the
 * client address); the scenarios then go through it instead of a socket to `port`.
 */
import type http from 'node:http';
import {
  constant,
  type Decision,
  type HeadersOption,
  ManualClock,
  MemoryStore,
  PROBLEM_QUOTA_EXCEEDED,
  PROBLEM_REDUCED_CAPACITY,
  type Rule,
  type Store,
  type StoreDecision,
  type TrustProxy,
  tenant,
  user,
} from '@tollgate/core';
import type { AccessList } from '@tollgate/core/http';
import { afterEach, describe, expect, it } from 'vitest';
import { send as loopback } from '../setup/http.js';

/** The request shape scenario rules read: both Express and Fastify requests fit. */
export interface ScenarioRequest {
  headers: Record<string, string | string[] | undefined>;
}

export interface RouteSpec {
  method: 'GET' | 'POST';
  path: string;
  /** Rules added to the app-level stack for this route (or replacing it, `mode: 'replace'`). */
  rules?: Rule<ScenarioRequest>[];
  /** @default 'add' */
  mode?: 'add' | 'replace';
}

export interface AppSpec {
  rules: Rule<ScenarioRequest>[];
  routes: RouteSpec[];
  store: Store;
  clock: ManualClock;
  trustProxy?: TrustProxy;
  headers?: HeadersOption;
  dryRun?: boolean;
  /** The limiter's `allow` and `deny` lists (addresses/CIDRs or a function), as given. */
  allow?: AccessList<ScenarioRequest>;
  deny?: AccessList<ScenarioRequest>;
  /** Other limiter options whose functions take only the request or the decision, passed as they are. */
  options?: { statusCode?: number; message?: unknown; onRejected?: (req: never, res: never, d: Decision) => void };
  maxHeaderSize: number;
  /** App-level tiers and the function picking one (the adapters' `tiers` and `tier` options). */
  tiers?: Record<string, Rule<ScenarioRequest>[]>;
  tier?: (req: ScenarioRequest) => string | Promise<string>;
}

export interface ListeningApp {
  port: number;
  close(): Promise<void>;
  /** Another transport for the same requests (e.g. in-process injection); default: HTTP to `port`. */
  send?(o: SendOptions): Promise<ScenarioResponse>;
  /** The adapter's `update(ruleName, changes)` (Express and node: the middleware's; Fastify: `app.tollgate`). */
  update(ruleName: string, changes: object): void;
}

export type MakeApp = (spec: AppSpec) => Promise<ListeningApp>;
export type MakeStore = () => Promise<{ store: Store; close(): Promise<void> }>;

export interface ScenarioResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: JSON bodies are inspected field by field
  body: any;
  ms: number;
}

export interface SendOptions {
  method?: 'GET' | 'POST';
  path?: string;
  headers?: Record<string, string>;
  /** Connect from this loopback address (127.0.0.1 by default). */
  from?: string;
}

const MAX_HEADER = 4 * 1024 * 1024;

function send(port: number, o: SendOptions = {}): Promise<ScenarioResponse> {
  const started = performance.now();
  return loopback(port, o).reply.then((r) => ({ ...r, ms: performance.now() - started }));
}

/** A store whose own failure policy answers every decision with `degraded: 'deny'`. */
function degradedDeny(): Store {
  return {
    async consume(ops): Promise<StoreDecision> {
      const outcome = { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: 0, delayMs: 0, reason: undefined };
      return { allowed: false, now: 0, degraded: 'deny', outcomes: ops.map(() => outcome) };
    },
    peek: () => Promise.reject(new Error('unused')),
    refund: async () => {},
    reset: async () => {},
    close: async () => {},
  };
}

/** The bytes every port sends for the refusals of the scenario 'one answer on every port'. */
const ONE_ANSWER = [
  [
    429,
    'application/problem+json',
    '212',
    '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"Rate limit exceeded for policy \\"ip\\". Retry in 60 seconds.","violated-policies":["ip"]}',
  ],
  [
    403,
    'application/problem+json',
    '114',
    '{"type":"about:blank","title":"Forbidden","status":403,"detail":"This client is not allowed to use this service."}',
  ],
  [
    503,
    'application/problem+json',
    '214',
    '{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","title":"Service Unavailable","status":503,"detail":"The server is temporarily unable to decide rate limits; try again shortly."}',
  ],
  [429, 'application/json; charset=utf-8', '36', '{"error":"too many","retry":"later"}'],
];

const userKey = user((req: ScenarioRequest) => req.headers['x-user']);
const tenantKey = tenant((req: ScenarioRequest) => req.headers['x-tenant']);

/**
 * Registers the scenarios under `describe(name)`.
 * @param makeStore a fresh store per scenario (default: a MemoryStore on the scenario's clock)
 */
export function httpScenarios(name: string, makeApp: MakeApp, makeStore?: (clock: ManualClock) => ReturnType<MakeStore>): void {
  describe(`HTTP scenarios: ${name}`, () => {
    const open: Array<() => Promise<void>> = [];
    afterEach(async () => {
      while (open.length > 0) await open.pop()?.();
    });

    async function start(partial: Partial<AppSpec> & { rules: Rule<ScenarioRequest>[] }, startMs = 0) {
      const clock = partial.clock ?? new ManualClock(startMs);
      const made = makeStore ? await makeStore(clock) : { store: new MemoryStore({ clock }), close: async () => {} };
      open.push(made.close);
      // Every store method call is counted (`storeCalls`), for scenarios that must make none.
      let calls = 0;
      const counted = new Proxy(partial.store ?? made.store, {
        get(target, name) {
          const v = Reflect.get(target, name);
          if (typeof v !== 'function') return v;
          return (...args: unknown[]) => {
            calls++;
            return v.apply(target, args);
          };
        },
      });
      const app = await makeApp({ routes: [], maxHeaderSize: MAX_HEADER, ...partial, store: counted, clock });
      open.push(() => app.close());
      const request = (o?: SendOptions) => (app.send ? app.send(o ?? {}) : send(app.port, o));
      return { clock, request, store: made.store, storeCalls: () => calls, app };
    }

    async function statuses(request: (o?: SendOptions) => Promise<ScenarioResponse>, n: number, o?: SendOptions): Promise<number[]> {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push((await request(o)).status);
      return out;
    }

    describe('one rule per algorithm: limit, 429, Retry-After exactness', () => {
      // Each case is set up so that retryAfterMs is a whole number of seconds: waiting
      // Retry-After seconds is then exactly enough, and one millisecond less is not.
      const cases: Array<{ rule: Omit<Rule<ScenarioRequest>, 'name'>; admitted: number; startMs: number; retryAfter: number }> = [
        { rule: { algorithm: 'fixed-window', limit: 3, window: '10s' }, admitted: 3, startMs: 0, retryAfter: 10 },
        { rule: { algorithm: 'fixed-window', limit: 3, window: '10s' }, admitted: 3, startMs: 2_000, retryAfter: 8 },
        { rule: { algorithm: 'sliding-log', limit: 3, window: '10s' }, admitted: 3, startMs: 0, retryAfter: 10 },
        { rule: { algorithm: 'sliding-window', limit: 2, window: '10s' }, admitted: 2, startMs: 1, retryAfter: 10 },
        { rule: { algorithm: 'token-bucket', limit: 5, window: '10s' }, admitted: 5, startMs: 0, retryAfter: 2 },
        { rule: { algorithm: 'token-bucket', limit: 5, window: '10s', burst: 2 }, admitted: 2, startMs: 0, retryAfter: 2 },
        { rule: { algorithm: 'leaky-bucket', limit: 5, window: '10s' }, admitted: 5, startMs: 0, retryAfter: 2 },
        { rule: { algorithm: 'sliding-buckets', limit: 3, window: '10s' }, admitted: 3, startMs: 0, retryAfter: 10 },
      ];
      for (const c of cases) {
        const label = `${c.rule.algorithm}${c.rule.burst ? ` burst ${c.rule.burst}` : ''} from t=${c.startMs}`;
        it(label, async () => {
          const { clock, request } = await start({ rules: [{ name: 'ip', ...c.rule }] }, c.startMs);
          const admitted: ScenarioResponse[] = [];
          for (let i = 0; i < c.admitted; i++) admitted.push(await request());
          expect(admitted.map((r) => r.status)).toEqual(Array(c.admitted).fill(200));
          // The request that took the last unit already says when the next one comes (t at r=0).
          expect(admitted.at(-1)?.headers.ratelimit).toBe(`"ip";r=0;t=${c.retryAfter}`);
          expect((await request()).status).toBe(429);
          const refused = await request();
          expect(refused.status).toBe(429);
          expect(refused.headers['retry-after']).toBe(String(c.retryAfter));
          expect(refused.headers['cache-control']).toBe('no-store');
          expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
          expect(refused.body).toMatchObject({
            type: PROBLEM_QUOTA_EXCEEDED,
            title: 'Too Many Requests',
            status: 429,
            'violated-policies': ['ip'],
          });
          expect(refused.headers.ratelimit).toBe(`"ip";r=0;t=${c.retryAfter}`);
          clock.advance(c.retryAfter * 1000 - 1);
          const early = await request();
          expect(early.status).toBe(429);
          expect(early.headers['retry-after']).toBe('1');
          clock.advance(1);
          expect((await request()).status).toBe(200);
        });
      }
    });

    it('a stack of user + tenant + global + endpoint: the tenant refuses and the user rule consumed nothing', async () => {
      const { request } = await start({
        rules: [
          { name: 'user', key: userKey, limit: 5, window: '1m' },
          { name: 'tenant', key: tenantKey, limit: 3, window: '1m' },
          { name: 'global', key: constant('all'), limit: 1000, window: '1m' },
        ],
        routes: [
          { method: 'POST', path: '/orders', rules: [{ name: 'endpoint', key: constant('POST /orders'), limit: 100, window: '1m' }] },
        ],
      });
      const as = (u: string, t: string) => ({ method: 'POST' as const, path: '/orders', headers: { 'x-user': u, 'x-tenant': t } });
      const ok = await request(as('alice', 'acme'));
      expect(ok.status).toBe(200);
      expect(ok.headers['ratelimit-policy']).toBe('"user";q=5;w=60, "tenant";q=3;w=60, "global";q=1000;w=60, "endpoint";q=100;w=60');
      expect(ok.body.rateLimit.rules.map((r: { name: string }) => r.name)).toEqual(['user', 'tenant', 'global', 'endpoint']);
      expect(await statuses(request, 2, as('alice', 'acme'))).toEqual([200, 200]);
      // acme's tenant budget is spent: bob is refused by the tenant rule alone.
      const refused = await request(as('bob', 'acme'));
      expect(refused.status).toBe(429);
      expect(refused.body['violated-policies']).toEqual(['tenant']);
      // Had the refused request consumed bob's user budget, only 4 of these would pass
      // (each goes to a fresh tenant, so only the user rule can refuse).
      const bobs: number[] = [];
      for (let i = 0; i < 6; i++) bobs.push((await request(as('bob', `tenant-${i}`))).status);
      expect(bobs).toEqual([200, 200, 200, 200, 200, 429]);
      // Anonymous requests: user and tenant rules do not apply, the global one does.
      const anon = await request({ method: 'POST', path: '/orders' });
      expect(anon.status).toBe(200);
      expect(anon.headers['ratelimit-policy']).toBe('"global";q=1000;w=60, "endpoint";q=100;w=60');
    });

    it('per-route rules add to the app-level ones, and a route refusal gives back the app-level unit', async () => {
      const { request } = await start({
        rules: [{ name: 'ip', limit: 10, window: '1m' }],
        routes: [{ method: 'POST', path: '/login', rules: [{ name: 'login', limit: 2, window: '15m', algorithm: 'fixed-window' }] }],
      });
      const login = { method: 'POST' as const, path: '/login' };
      const first = await request(login);
      expect(first.headers.ratelimit).toBe('"ip";r=9;t=61, "login";r=1;t=900');
      expect(await statuses(request, 1, login)).toEqual([200]);
      const refused = await request(login);
      expect(refused.status).toBe(429);
      expect(refused.body['violated-policies']).toEqual(['login']);
      expect(refused.headers['retry-after']).toBe('900');
      // 2 logins consumed app-level units; the refused one was refunded: 8 are left.
      expect(await statuses(request, 9)).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 429]);
      // The app-level refusal now also covers /login. Express decides the app-level rules
      // first and stops there (['ip']); Fastify decides the route's whole stack at once and
      // names every rule that refuses (['ip', 'login'], SPEC 4). Either way 'ip' is named.
      const blocked = await request(login);
      expect(blocked.status).toBe(429);
      expect(blocked.body['violated-policies']).toContain('ip');
    });

    it('double refund: a route-level refusal gives the app-level unit back once, even when the app-level rule does not count refusals', async () => {
      const { request } = await start({
        rules: [{ name: 'ip', limit: 3, window: '1m', algorithm: 'fixed-window', countIf: (status: number) => status < 400 }],
        routes: [{ method: 'POST', path: '/login', rules: [{ name: 'login', limit: 1, window: '15m', algorithm: 'fixed-window' }] }],
      });
      const login = { method: 'POST' as const, path: '/login' };
      expect((await request(login)).status).toBe(200);
      // Each refused login consumes an app-level unit and must give back exactly that one.
      expect(await statuses(request, 4, login)).toEqual([429, 429, 429, 429]);
      // One unit of 3 used: two more pass, then the app-level rule refuses.
      expect(await statuses(request, 3)).toEqual([200, 200, 429]);
    });

    it('headers after a route-level refusal report the app-level rule after its refund', async () => {
      const { request } = await start({
        rules: [{ name: 'ip', limit: 10, window: '1m', algorithm: 'fixed-window' }],
        routes: [{ method: 'POST', path: '/login', rules: [{ name: 'login', limit: 1, window: '15m', algorithm: 'fixed-window' }] }],
      });
      const login = { method: 'POST' as const, path: '/login' };
      expect((await request(login)).headers.ratelimit).toBe('"ip";r=9;t=60, "login";r=0;t=900');
      const refused = await request(login);
      expect(refused.status).toBe(429);
      // 9 are left: the refused request's unit went back before the headers were written.
      expect(refused.headers.ratelimit).toContain('"ip";r=9;t=60');
      expect(refused.body['violated-policies']).toEqual(['login']);
      expect((await request()).headers.ratelimit).toBe('"ip";r=8;t=60');
    });

    it("a route's rules can replace the app-level ones (mode: 'replace'): a bulk endpoint with a higher limit", async () => {
      const { request } = await start({
        rules: [{ name: 'ip', limit: 2, window: '1m', algorithm: 'fixed-window' }],
        routes: [
          { method: 'POST', path: '/bulk', mode: 'replace', rules: [{ name: 'bulk', limit: 5, window: '1m', algorithm: 'fixed-window' }] },
        ],
      });
      const bulk = { method: 'POST' as const, path: '/bulk' };
      const first = await request(bulk);
      expect(first.status).toBe(200);
      expect(first.headers['ratelimit-policy']).toBe('"bulk";q=5;w=60');
      expect(first.body.rateLimit.rules.map((r: { name: string }) => r.name)).toEqual(['bulk']);
      expect(await statuses(request, 5, bulk)).toEqual([200, 200, 200, 200, 429]);
      // The app-level budget was never touched by the bulk route.
      expect(await statuses(request, 3)).toEqual([200, 200, 429]);
    });

    it('routes naming the same group share one budget', async () => {
      const exportRule = (name: string): Rule<ScenarioRequest> => ({
        name,
        group: 'export',
        limit: 3,
        window: '1h',
        algorithm: 'fixed-window',
      });
      const { request } = await start({
        rules: [{ name: 'ip', limit: 100, window: '1m' }],
        routes: [
          { method: 'GET', path: '/export/csv', rules: [exportRule('export-csv')] },
          { method: 'GET', path: '/export/pdf', rules: [exportRule('export-pdf')] },
          { method: 'GET', path: '/other', rules: [{ name: 'other', limit: 3, window: '1h', algorithm: 'fixed-window' }] },
        ],
      });
      expect((await request({ path: '/export/csv' })).status).toBe(200);
      expect((await request({ path: '/export/pdf' })).status).toBe(200);
      expect((await request({ path: '/export/csv' })).status).toBe(200);
      const refused = await request({ path: '/export/pdf' });
      expect(refused.status).toBe(429);
      expect(refused.body['violated-policies']).toEqual(['export-pdf']);
      expect((await request({ path: '/other' })).status).toBe(200);
    });

    it('weighted cost: a static cost, a cost from the request, and a cost no wait can admit', async () => {
      const { request } = await start({
        rules: [{ name: 'ip', limit: 100, window: '1m' }],
        routes: [
          { method: 'GET', path: '/export', rules: [{ name: 'export', limit: 10, window: '1m', algorithm: 'fixed-window', cost: 4 }] },
          {
            method: 'GET',
            path: '/search',
            rules: [
              {
                name: 'search',
                limit: 10,
                window: '1m',
                algorithm: 'fixed-window',
                cost: (req) => Number(req.headers['x-cost'] ?? 1),
              },
            ],
          },
        ],
      });
      expect(await statuses(request, 3, { path: '/export' })).toEqual([200, 200, 429]);
      const ok = await request({ path: '/search', headers: { 'x-cost': '7' } });
      expect(ok.headers.ratelimit).toContain('"search";r=3;');
      expect((await request({ path: '/search', headers: { 'x-cost': '4' } })).status).toBe(429);
      expect((await request({ path: '/search', headers: { 'x-cost': '3' } })).status).toBe(200);
      const never = await request({ path: '/search', headers: { 'x-cost': '11' } });
      expect(never.status).toBe(429);
      expect(never.headers['retry-after']).toBeUndefined();
      expect(never.body.detail).toMatch(/can ever admit/);
      // A cost the client garbles fails closed: refused, never a 500.
      const garbled = await request({ path: '/search', headers: { 'x-cost': 'lots' } });
      expect(garbled.status).toBe(429);
    });

    describe('header modes', () => {
      const rules: Rule<ScenarioRequest>[] = [
        { name: 'user', key: userKey, limit: 100, window: '1m', algorithm: 'fixed-window' },
        { name: 'tenant', key: tenantKey, limit: 4000, window: '1h', algorithm: 'fixed-window' },
      ];
      const who = { headers: { 'x-user': 'alice', 'x-tenant': 'acme' } };
      // At t = 42 s: the user window ends in 18 s, the tenant window in 3558 s.
      const at = 42_000;
      it('draft-10 (default): one item per rule, in order', async () => {
        const { request } = await start({ rules }, at);
        const r = await request(who);
        expect(r.headers['ratelimit-policy']).toBe('"user";q=100;w=60, "tenant";q=4000;w=3600');
        expect(r.headers.ratelimit).toBe('"user";r=99;t=18, "tenant";r=3999;t=3558');
        expect(r.headers['x-ratelimit-limit']).toBeUndefined();
      });
      it('draft-7: the most restrictive rule', async () => {
        const { request } = await start({ rules, headers: 'draft-7' }, at);
        const r = await request(who);
        expect(r.headers['ratelimit-policy']).toBe('100;w=60');
        expect(r.headers.ratelimit).toBe('limit=100, remaining=99, reset=18');
      });
      it('draft-6: the most restrictive rule', async () => {
        const { request } = await start({ rules, headers: 'draft-6' }, at);
        const r = await request(who);
        expect(r.headers['ratelimit-policy']).toBe('100;w=60');
        expect(r.headers['ratelimit-limit']).toBe('100');
        expect(r.headers['ratelimit-remaining']).toBe('99');
        expect(r.headers['ratelimit-reset']).toBe('18');
        expect(r.headers.ratelimit).toBeUndefined();
      });
      it('legacy: X-RateLimit-* with an epoch reset', async () => {
        const { request } = await start({ rules, headers: 'legacy' }, 1_700_000_042_000);
        const r = await request(who);
        expect(r.headers['x-ratelimit-limit']).toBe('100');
        expect(r.headers['x-ratelimit-remaining']).toBe('99');
        expect(r.headers['x-ratelimit-reset']).toBe('1700000100');
        expect(r.headers.ratelimit).toBeUndefined();
      });
      it('draft-10 and legacy together', async () => {
        const { request } = await start({ rules, headers: ['draft-10', 'legacy'] }, at);
        const r = await request(who);
        expect(r.headers.ratelimit).toBe('"user";r=99;t=18, "tenant";r=3999;t=3558');
        expect(r.headers['x-ratelimit-remaining']).toBe('99');
      });
      it('false: no rate-limit headers, but Retry-After on a refusal', async () => {
        const { request } = await start({ rules: [{ name: 'ip', limit: 1, window: '1m', algorithm: 'fixed-window' }], headers: false }, at);
        const r = await request();
        expect(Object.keys(r.headers).filter((h) => h.includes('ratelimit'))).toEqual([]);
        const refused = await request();
        expect(refused.status).toBe(429);
        expect(refused.headers['retry-after']).toBe('18');
        expect(Object.keys(refused.headers).filter((h) => h.includes('ratelimit'))).toEqual([]);
      });
    });

    it('dryRun: decides, counts and reports, but never refuses', async () => {
      const { request } = await start({ rules: [{ name: 'ip', limit: 1, window: '1m', algorithm: 'fixed-window' }], dryRun: true });
      expect((await request()).status).toBe(200);
      const over = await request();
      expect(over.status).toBe(200);
      expect(over.headers.ratelimit).toBe('"ip";r=0;t=60');
      expect(over.body.rateLimit).toMatchObject({ allowed: false, rejectedBy: ['ip'] });
    });

    describe('client identity', () => {
      it('different client addresses have different budgets (real sockets)', async () => {
        const { request } = await start({ rules: [{ name: 'ip', limit: 1, window: '1m' }] });
        expect((await request({ from: '127.0.0.2' })).status).toBe(200);
        expect((await request({ from: '127.0.0.2' })).status).toBe(429);
        expect((await request({ from: '127.0.0.3' })).status).toBe(200);
      });
      for (const trustProxy of [undefined, '10.0.0.0/8'] as const) {
        it(`a spoofed X-Forwarded-For changes nothing without a trusted proxy (trustProxy ${String(trustProxy)})`, async () => {
          const { request } = await start({ rules: [{ name: 'ip', limit: 2, window: '1m' }], ...(trustProxy ? { trustProxy } : {}) });
          const spoofs = ['203.0.113.1', '203.0.113.2', '198.51.100.1, 203.0.113.3', 'garbage'];
          const seen: number[] = [];
          for (const xff of spoofs)
            seen.push((await request({ from: '127.0.0.4', headers: { 'x-forwarded-for': xff, forwarded: `for=${xff}` } })).status);
          expect(seen).toEqual([200, 200, 429, 429]);
        });
      }
      it('a chain through two trusted proxies keys on the real client', async () => {
        const { request } = await start({ rules: [{ name: 'ip', limit: 2, window: '1m' }], trustProxy: 'loopback, 10.0.0.0/8' });
        const via = (client: string, spoof = '') => ({ headers: { 'x-forwarded-for': `${spoof}${client}, 10.1.2.3` } });
        expect((await request(via('198.51.100.7'))).status).toBe(200);
        // Whatever the client writes to the left of its own address is ignored.
        expect((await request(via('198.51.100.7', '1.1.1.1, '))).status).toBe(200);
        const refused = await request(via('198.51.100.7', '2.2.2.2, '));
        expect(refused.status).toBe(429);
        expect((await request(via('198.51.100.8'))).status).toBe(200);
        // The proxies' own address is not the key: another client through them is independent.
        expect((await request(via('198.51.100.9'))).status).toBe(200);
      });
      it('RFC 7239 Forwarded and a hop count', async () => {
        const { request } = await start({ rules: [{ name: 'ip', limit: 1, window: '1m' }], trustProxy: 2 });
        // Hop count 2: the socket peer and one more proxy are trusted; the next hop is the client.
        const xff = (h: string) => ({ headers: { 'x-forwarded-for': h } });
        expect((await request(xff('6.6.6.6, 198.51.100.7, 10.0.0.2'))).status).toBe(200);
        expect((await request(xff('7.7.7.7, 198.51.100.7, 10.0.0.9'))).status).toBe(429);
      });
      it('IPv6 clients in one /56 share a key; another /56 does not', async () => {
        const { request } = await start({ rules: [{ name: 'ip', limit: 2, window: '1m' }], trustProxy: 'loopback' });
        const from6 = (a: string) => ({ headers: { 'x-forwarded-for': a } });
        expect((await request(from6('2001:db8:aa:bb01::1'))).status).toBe(200);
        expect((await request(from6('2001:DB8:AA:BBFE:1:2:3:4'))).status).toBe(200);
        expect((await request(from6('[2001:db8:aa:bb00::9]:443'))).status).toBe(429);
        expect((await request(from6('2001:db8:aa:cc00::1'))).status).toBe(200);
        // IPv4-mapped IPv6 is the IPv4 client.
        expect((await request(from6('::ffff:198.51.100.20'))).status).toBe(200);
        expect((await request(from6('198.51.100.20'))).status).toBe(200);
        expect((await request(from6('198.51.100.20'))).status).toBe(429);
      });
    });

    describe('tiers, limits per request and update', () => {
      const plan = (req: ScenarioRequest) => {
        const p = req.headers['x-plan'];
        return typeof p === 'string' ? p : 'free';
      };
      const tiers: Record<string, Rule<ScenarioRequest>[]> = {
        free: [{ name: 'free', key: userKey, limit: 2, window: '1m', algorithm: 'fixed-window' }],
        pro: [{ name: 'pro', key: userKey, limit: 4, window: '1m', algorithm: 'fixed-window' }],
      };
      const base: Rule<ScenarioRequest>[] = [{ name: 'ip', limit: 100, window: '1m', algorithm: 'fixed-window' }];

      it("the plan picks the tier's rules, decided with the app-level ones; headers name the tier's rule and limit", async () => {
        const { request } = await start({ rules: base, tiers, tier: plan });
        const free = { headers: { 'x-user': 'alice' } };
        const pro = { headers: { 'x-user': 'bob', 'x-plan': 'pro' } };
        const r = await request(free);
        expect(r.headers['ratelimit-policy']).toBe('"ip";q=100;w=60, "free";q=2;w=60');
        expect(await statuses(request, 2, free)).toEqual([200, 429]);
        const p = await request(pro);
        expect(p.headers['ratelimit-policy']).toBe('"ip";q=100;w=60, "pro";q=4;w=60');
        expect(await statuses(request, 4, pro)).toEqual([200, 200, 200, 429]);
        // The refusals consumed nothing from the app-level rule: 1 + 1 + 1 + 3 admitted.
        expect((await request({ headers: { 'x-user': 'carol' } })).headers.ratelimit).toMatch(/^"ip";r=93;/);
      });

      it('an unknown plan goes to the error handler (500), never through', async () => {
        const { request } = await start({ rules: base, tiers, tier: plan });
        const r = await request({ headers: { 'x-user': 'alice', 'x-plan': 'gold' } });
        expect(r.status).toBe(500);
        expect(r.headers.ratelimit).toBeUndefined();
      });

      it('an async plan lookup is awaited; route rules join the same decision', async () => {
        const { request } = await start({
          rules: base,
          tiers,
          tier: async (req) => plan(req),
          routes: [
            {
              method: 'POST',
              path: '/upload',
              rules: [{ name: 'upload', key: userKey, limit: 1, window: '1m', algorithm: 'fixed-window' }],
            },
          ],
        });
        const r = await request({ method: 'POST', path: '/upload', headers: { 'x-user': 'alice', 'x-plan': 'pro' } });
        expect(r.status).toBe(200);
        expect(r.body.rateLimit.rules.map((x: { name: string }) => x.name).sort()).toEqual(['ip', 'pro', 'upload']);
        const again = await request({ method: 'POST', path: '/upload', headers: { 'x-user': 'alice', 'x-plan': 'pro' } });
        expect(again.status).toBe(429);
        expect(again.body['violated-policies']).toEqual(['upload']);
      });

      it('a limit per request: headers and the decision report the limit applied; a bad value is a 500, never a pass', async () => {
        const { request } = await start({
          rules: [
            {
              name: 'user',
              key: userKey,
              limit: (req) => Number(req.headers['x-quota'] ?? 3),
              window: '1m',
              algorithm: 'fixed-window',
            },
          ],
        });
        const r = await request({ headers: { 'x-user': 'alice', 'x-quota': '7' } });
        expect(r.headers['ratelimit-policy']).toBe('"user";q=7;w=60');
        expect(r.body.rateLimit.rules[0]).toMatchObject({ limit: 7, remaining: 6 });
        expect((await request({ headers: { 'x-user': 'alice', 'x-quota': '1' } })).status).toBe(429);
        expect((await request({ headers: { 'x-user': 'alice', 'x-quota': 'lots' } })).status).toBe(500);
      });

      it("update raises a rule's limit in place, for the next request, keeping what was used", async () => {
        const { request, app } = await start({
          rules: [{ name: 'user', key: userKey, limit: 2, window: '1m', algorithm: 'fixed-window' }],
          tiers,
          tier: plan,
        });
        const alice = { headers: { 'x-user': 'alice', 'x-plan': 'pro' } };
        expect(await statuses(request, 3, alice)).toEqual([200, 200, 429]);
        app.update('user', { limit: 3 });
        app.update('pro', { limit: 10 });
        const r = await request(alice);
        expect(r.status).toBe(200);
        expect(r.headers['ratelimit-policy']).toBe('"user";q=3;w=60, "pro";q=10;w=60');
        expect(r.headers.ratelimit).toBe('"user";r=0;t=60, "pro";r=7;t=60');
        expect(() => app.update('usr', { limit: 3 })).toThrow(expect.objectContaining({ code: 'TG_UNKNOWN_RULE' }));
        expect(() => app.update('user', { limti: 3 })).toThrow(expect.objectContaining({ code: 'TG_UNKNOWN_OPTION' }));
      });
    });

    it('statusCode, message (string, object, function) and onRejected', async () => {
      const rejected: Decision[] = [];
      const variants: Array<{ o: NonNullable<AppSpec['options']>; status: number; type: RegExp; body: string }> = [
        { o: { statusCode: 503, message: 'slow down' }, status: 503, type: /^text\/plain/, body: 'slow down' },
        { o: { message: { error: 'too many' } }, status: 429, type: /^application\/json/, body: '{"error":"too many"}' },
        {
          o: { message: (_req: unknown, d: Decision) => ({ rules: d.rejectedBy }), onRejected: (_q, _s, d) => rejected.push(d) },
          status: 429,
          type: /^application\/json/,
          body: '{"rules":["ip"]}',
        },
      ];
      for (const v of variants) {
        const { request } = await start({ rules: [{ name: 'ip', limit: 1, window: '1m', algorithm: 'fixed-window' }], options: v.o });
        await request();
        const res = await request();
        expect(res.status).toBe(v.status);
        expect(res.headers['content-type']).toMatch(v.type);
        expect(res.text).toBe(v.body);
        expect(res.headers['retry-after']).toBe('60');
      }
      expect(rejected.map((d) => d.rejectedBy)).toEqual([['ip']]);
    });

    it("a store's own failure policy answering 'deny' becomes a 503 problem", async () => {
      const { request } = await start({ rules: [{ name: 'ip', limit: 1, window: '1m' }], store: degradedDeny() });
      const res = await request();
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ status: 503, type: PROBLEM_REDUCED_CAPACITY });
      expect(res.headers['retry-after']).toBe('1');
    });

    // One answer on every port: the same Content-Type and body bytes, whatever the framework
    // (Fastify used to append `; charset=utf-8` to the problem type). Each port's suite
    // compares with these same bytes, so the ports agree with each other byte for byte.
    it('one answer on every port: the 429, 403 and 503 problems and an object message, byte for byte', async () => {
      const rules: Rule<ScenarioRequest>[] = [{ name: 'ip', limit: 1, window: '1m', algorithm: 'fixed-window' }];
      const limited = await start({ rules, deny: '127.0.0.9' });
      await limited.request();
      const answers = [
        await limited.request(),
        await limited.request({ from: '127.0.0.9' }),
        await (await start({ rules, store: degradedDeny() })).request(),
      ];
      const message = await start({ rules, options: { message: { error: 'too many', retry: 'later' } } });
      await message.request();
      answers.push(await message.request());
      expect(answers.map((r) => [r.status, r.headers['content-type'], r.headers['content-length'], r.text])).toEqual(ONE_ANSWER);
    });

    describe('allow and deny lists', () => {
      const rules: Rule<ScenarioRequest>[] = [{ name: 'ip', limit: 1, window: '1m', algorithm: 'fixed-window' }];
      const loginRoute: RouteSpec = {
        method: 'POST',
        path: '/login',
        rules: [{ name: 'login', limit: 1, window: '15m', algorithm: 'fixed-window' }],
      };

      it('addresses and CIDRs: an allowed client bypasses every rule (route rules too), a denied one gets 403 and no store call', async () => {
        const { request, storeCalls } = await start({
          rules,
          routes: [loginRoute],
          // The mapped form names the IPv4 client; a client on both lists is denied.
          allow: ['127.0.0.2', '::ffff:127.0.0.3', '127.0.0.8/30'],
          deny: '127.0.0.9, 127.0.0.64/26',
        });
        for (const from of ['127.0.0.2', '127.0.0.3', '127.0.0.10']) {
          for (let i = 0; i < 3; i++) {
            const r = await request({ from, method: 'POST', path: '/login' });
            expect(r.status, from).toBe(200);
            expect(r.headers.ratelimit, from).toBeUndefined();
            expect(r.body.rateLimit).toBeNull();
          }
        }
        expect(storeCalls()).toBe(0);
        for (const from of ['127.0.0.9', '127.0.0.64', '127.0.0.100', '127.0.0.127']) {
          const denied = await request({ from });
          expect(denied.status, from).toBe(403);
          expect(denied.headers['content-type']).toMatch(/^application\/problem\+json/);
          expect(denied.headers['cache-control']).toBe('no-store');
          expect(denied.headers['retry-after']).toBeUndefined();
          expect(denied.headers.ratelimit).toBeUndefined();
          expect(denied.body).toMatchObject({ type: 'about:blank', title: 'Forbidden', status: 403 });
        }
        expect(storeCalls()).toBe(0);
        // Anyone else is limited as usual.
        expect(await statuses(request, 2, { from: '127.0.0.4' })).toEqual([200, 429]);
        expect(await statuses(request, 1, { from: '127.0.0.128' })).toEqual([200]);
        expect(storeCalls()).toBeGreaterThan(0);
      });

      for (const trustProxy of [undefined, '10.0.0.0/8'] as const) {
        it(`spoofing: a forwarding header naming a listed address from an untrusted peer changes nothing (trustProxy ${String(trustProxy)})`, async () => {
          const { request } = await start({
            rules,
            allow: ['203.0.113.7'],
            deny: ['127.0.0.5'],
            ...(trustProxy ? { trustProxy } : {}),
          });
          const spoof = { 'x-forwarded-for': '203.0.113.7', forwarded: 'for=203.0.113.7' };
          // Not allowed: limited as the socket address it is.
          expect(await statuses(request, 2, { from: '127.0.0.6', headers: spoof })).toEqual([200, 429]);
          // A denied peer cannot talk its way out by naming another client.
          expect((await request({ from: '127.0.0.5', headers: { 'x-forwarded-for': '198.51.100.1' } })).status).toBe(403);
        });
      }

      it('behind a trusted proxy the forwarded client is matched, not the proxy; IPv6 and IPv4-mapped addresses', async () => {
        const { request } = await start({
          rules,
          trustProxy: 'loopback',
          allow: ['203.0.113.7', '2001:db8:aa::/48', '2001:db8:bb:cc01::1', '198.51.100.0/24'],
          deny: ['127.0.0.0/8', '2001:db8:aa:dead::/64'],
        });
        const via = (xff: string) => ({ headers: { 'x-forwarded-for': xff } });
        // The loopback proxy itself is on the deny list: only the client it names counts.
        expect(await statuses(request, 3, via('203.0.113.7'))).toEqual([200, 200, 200]);
        expect((await request(via('203.0.113.7'))).headers.ratelimit).toBeUndefined();
        // Whatever the client writes to the left of its own address is ignored.
        expect(await statuses(request, 2, via('203.0.113.7, 203.0.113.8'))).toEqual([200, 429]);
        expect(await statuses(request, 2, via('2001:db8:aa:1::5'))).toEqual([200, 200]);
        expect((await request(via('2001:db8:aa:dead::1'))).status).toBe(403);
        // A single IPv6 address is that address, not the /56 the ip() key groups it into.
        expect(await statuses(request, 2, via('2001:DB8:BB:CC01:0:0:0:1'))).toEqual([200, 200]);
        expect(await statuses(request, 2, via('2001:db8:bb:cc01::2'))).toEqual([200, 429]);
        expect(await statuses(request, 2, via('::ffff:198.51.100.20'))).toEqual([200, 200]);
        // No forwarded client: the proxy is the client, and it is denied.
        expect((await request()).status).toBe(403);
      });

      it('functions: sync or async, a throw or a non-boolean goes to the error handler', async () => {
        const { request, storeCalls } = await start({
          rules,
          allow: async (req) => req.headers['x-internal'] === 'yes',
          deny: (req) => {
            const v = req.headers['x-ban'];
            if (v === 'throw') throw new Error('deny bug');
            return (v === 'odd' ? 'yes' : v === 'me') as boolean;
          },
        });
        expect(await statuses(request, 3, { headers: { 'x-internal': 'yes' } })).toEqual([200, 200, 200]);
        expect((await request({ headers: { 'x-ban': 'me', 'x-internal': 'yes' } })).status).toBe(403);
        expect(storeCalls()).toBe(0);
        expect((await request({ headers: { 'x-ban': 'odd' } })).status).toBe(500);
        expect((await request({ headers: { 'x-ban': 'throw' } })).status).toBe(500);
        expect(storeCalls()).toBe(0);
        expect(await statuses(request, 2)).toEqual([200, 429]);
      });
    });

    describe('bad input: never a 500, never a client-chosen key, bounded time', () => {
      const rules: Rule<ScenarioRequest>[] = [
        { name: 'ip', limit: 3, window: '1m' },
        { name: 'user', key: userKey, limit: 1, window: '1m' },
      ];
      const huge = Array.from({ length: 10_000 }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.1`).join(', ');
      const megabyte = `${'1.2.3.4, '.repeat(116_000)}198.51.100.1`;
      const megaForwarded = `${'for=10.0.0.1, '.repeat(75_000)}for="[2001:db8::1]"`;
      const garbage: Array<Record<string, string>> = [
        { 'x-forwarded-for': 'garbage' },
        { 'x-forwarded-for': ',,,,' },
        { 'x-forwarded-for': '999.1.1.1, ::gggg, 1.2.3' },
        { 'x-forwarded-for': 'fe80::1%eth0' },
        { 'x-forwarded-for': '[::1' },
        { 'x-forwarded-for': huge },
        { 'x-forwarded-for': megabyte },
        { forwarded: megaForwarded },
        { forwarded: 'for="\\"quoted\\""; by=;;; ,,' },
        { forwarded: 'for=unknown' },
        { forwarded: 'for=_hidden' },
      ];
      for (const trustProxy of [undefined, 'loopback'] as const) {
        it(`hostile forwarding headers (trustProxy ${String(trustProxy)})`, async () => {
          const { request } = await start({ rules, ...(trustProxy ? { trustProxy } : {}) });
          const seen: number[] = [];
          for (const headers of garbage) {
            const r = await request({ from: '127.0.0.5', headers });
            expect(r.status === 200 || r.status === 429, `${r.status} for ${Object.keys(headers)[0]}`).toBe(true);
            expect(r.ms).toBeLessThan(2_000);
            seen.push(r.status);
          }
          // The socket address is the key every time (the chain ends at the loopback proxy or
          // at a malformed hop, or the header is ignored): 3 admitted, then refused.
          if (trustProxy === undefined) expect(seen).toEqual([200, 200, 200, ...Array(garbage.length - 3).fill(429)]);
          else {
            // Behind the trusted loopback proxy: the walk ends at the socket for garbage, and
            // keys on well-formed addresses only (fe80::/56, the nearest 10.x of the 10 000,
            // the nearest address of the megabyte).
            expect(seen).toEqual([200, 200, 200, 200, 429, 200, 200, 429, 429, 429, 429]);
          }
        });
      }
      it('a malformed hop behind a trusted proxy ends the walk at the last good address', async () => {
        const { request } = await start({ rules: [{ name: 'ip', limit: 1, window: '1m' }], trustProxy: 'loopback' });
        expect((await request({ headers: { 'x-forwarded-for': 'evil-choice, 198.51.100.30' } })).status).toBe(200);
        expect((await request({ headers: { 'x-forwarded-for': 'another-choice, 198.51.100.30' } })).status).toBe(429);
        // Garbage only: the key is the proxy's own address.
        expect((await request({ headers: { 'x-forwarded-for': 'choice-1' } })).status).toBe(200);
        expect((await request({ headers: { 'x-forwarded-for': 'choice-2' } })).status).toBe(429);
      });
      it('odd user ids: injection attempts, braces, non-ASCII, huge', async () => {
        const { request } = await start({ rules: [{ name: 'user', key: userKey, limit: 1, window: '1m' }] });
        const ids = ['{tg}:user:admin', 'a b', 'x'.repeat(10_000), 'ÄÖÜ-用户', '%0d%0aSet-Cookie: a=b', 'null', '#hash'];
        for (const id of ids) {
          const first = await request({ headers: { 'x-user': Buffer.from(id, 'utf8').toString('latin1') } });
          expect(first.status, id.slice(0, 20)).toBe(200);
          expect(first.headers['set-cookie']).toBeUndefined();
          expect(JSON.stringify(first.headers)).not.toContain('admin');
          const second = await request({ headers: { 'x-user': Buffer.from(id, 'utf8').toString('latin1') } });
          expect(second.status, id.slice(0, 20)).toBe(429);
        }
      });
    });
  });
}
