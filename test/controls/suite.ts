/**
 * The control scenarios: one suite every adapter runs unchanged, on
 * the manual clock and through HTTP over real loopback sockets.
 *
 * An adapter supplies `makeApp(spec)`: mount `spec.stages` in order (each stage's
 * options go to the adapter's binding as they are), then a handler for every path that
 * calls `spec.onStart(path, req)` and behaves as `spec.behaviour(path)` says:
 * - `ok`: 200 with JSON `{ path, start, rateLimit }` (`start`: clock time at the start,
 *   `rateLimit`: the request's decision or null);
 * - `status`: the same body with the given status;
 * - `slow`: the same body, `ms` of virtual time later (via `spec.timers`);
 * - `throw`: throws an Error (the framework answers 500);
 * - `stream`: writes `chunks` chunks `everyMs` apart (virtual), then ends.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import net from 'node:net';
import {
  type ConcurrencyOptions,
  constant,
  type HeadersOption,
  ManualClock,
  ManualTimers,
  MemorySlotStore,
  MemoryStore,
  type Rule,
  type ShedOptions,
  type SlotStore,
  type Store,
  type ThrottleOptions,
  user,
} from '@tollgate/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Reply, type SendOptions, type Sent, send, until } from './http.js';

// biome-ignore lint/suspicious/noExplicitAny: stage options are handed to each adapter's own request type
type AnyReq = any;

export type Behaviour =
  | { kind: 'ok' }
  | { kind: 'status'; status: number }
  | { kind: 'slow'; ms: number }
  | { kind: 'throw' }
  | { kind: 'stream'; chunks: number; everyMs: number };

export type Stage =
  | { kind: 'shed'; options: ShedOptions<AnyReq> }
  | {
      kind: 'slowDown';
      options: Omit<ThrottleOptions<AnyReq>, 'defaultKey'> & { timers: ManualTimers; headers?: HeadersOption; allow?: unknown };
    }
  | {
      kind: 'rateLimit';
      options: {
        rules: Rule<AnyReq>[];
        store: Store;
        clock: ManualClock;
        timers: ManualTimers;
        skip?: (req: AnyReq) => boolean;
        message?: (req: AnyReq) => unknown;
      };
    }
  | { kind: 'concurrency'; options: Omit<ConcurrencyOptions<AnyReq>, 'defaultKey'> & { timers: ManualTimers; allow?: unknown } };

export interface ControlAppSpec {
  clock: ManualClock;
  timers: ManualTimers;
  stages: Stage[];
  behaviour(path: string): Behaviour;
  onStart(path: string, req: { headers: Record<string, string | string[] | undefined> }): void;
}

export interface ListeningControlApp {
  port: number;
  close(): Promise<void>;
}

export type MakeControlApp = (spec: ControlAppSpec) => Promise<ListeningControlApp>;

/** Stores for one scenario: the limiter/throttle store and the concurrency slot store. */
export interface ScenarioStores {
  store: Store;
  slots: SlotStore;
  close(): Promise<void>;
}

export type MakeStores = (clock: ManualClock) => Promise<ScenarioStores>;

const memoryStores: MakeStores = async (clock) => {
  const store = new MemoryStore({ clock });
  const slots = new MemorySlotStore();
  return { store, slots, close: async () => Promise.all([store.close(), slots.close()]).then(() => undefined) };
};

const byHeader = (name: string) => (req: AnyReq) => req.headers[name] as string | undefined;

export function controlScenarios(name: string, makeApp: MakeControlApp, makeStores: MakeStores = memoryStores): void {
  describe(`controls over HTTP: ${name}`, () => {
    const open: Array<() => Promise<void>> = [];
    afterEach(async () => {
      while (open.length > 0) await open.pop()?.();
    });

    // No timer, socket or server may outlive the scenarios (leases: see the Redis runs).
    const handles = () =>
      process.getActiveResourcesInfo().filter((r) => r === 'Timeout' || r === 'TCPSocketWrap' || r === 'TCPServerWrap').length;
    let before = 0;
    beforeAll(() => {
      before = handles();
    });
    afterAll(async () => {
      await until(() => handles() <= before, 'timers and sockets to be released', 2000).catch(() => {});
      expect(
        process.getActiveResourcesInfo().filter((r) => r === 'Timeout' || r === 'TCPSocketWrap' || r === 'TCPServerWrap').length,
      ).toBeLessThanOrEqual(before);
    });

    /**
     * The store with its give-backs (refunds, settles) counted once done: a test waits for the
     * ones it expects (they run after the response's 'finish') instead of sleeping.
     */
    function counting(store: Store): { store: Store; givenBack: () => number } {
      let done = 0;
      const proxy = new Proxy(store, {
        get(target, prop) {
          const v: unknown = Reflect.get(target, prop, target);
          if (typeof v !== 'function') return v;
          if (prop === 'refund' || prop === 'settle') {
            return (...args: unknown[]) =>
              (v.apply(target, args) as Promise<void>).finally(() => {
                done++;
              });
          }
          return v.bind(target);
        },
      });
      return { store: proxy, givenBack: () => done };
    }

    async function start(
      build: (ctx: { clock: ManualClock; timers: ManualTimers; store: Store; slots: SlotStore }) => Stage[],
      behaviour: (path: string) => Behaviour = () => ({ kind: 'ok' }),
      startMs = 1_000_000,
    ) {
      const clock = new ManualClock(startMs);
      const timers = new ManualTimers(clock);
      const stores = await makeStores(clock);
      open.push(() => stores.close());
      const counted = counting(stores.store);
      const starts: Array<{ path: string; at: number; headers: Record<string, string | string[] | undefined> }> = [];
      const app = await makeApp({
        clock,
        timers,
        stages: build({ clock, timers, store: counted.store, slots: stores.slots }),
        behaviour,
        onStart: (path, req) => starts.push({ path, at: clock.now() - startMs, headers: req.headers }),
      });
      open.push(async () => {
        await app.close();
        // Nothing may be left scheduled once every request is over.
        expect(timers.pending, 'virtual timers left behind').toBe(0);
      });
      const get = (path = '/', o: Omit<SendOptions, 'path'> = {}): Sent => send(app.port, { ...o, path });
      const at = () => clock.now() - startMs;
      /** Waits until `n` give-backs in all are done. */
      const givenBack = (n: number) => until(() => counted.givenBack() >= n, `${n} give-backs done`, 10_000);
      return { clock, timers, starts, get, at, ...stores, startMs, port: app.port, givenBack };
    }

    async function all(sent: Sent[]): Promise<Reply[]> {
      return Promise.all(sent.map((s) => s.reply));
    }

    describe('throttle', () => {
      const throttle = (
        timers: ManualTimers,
        clock: ManualClock,
        store: Store,
        extra: Partial<ThrottleOptions<AnyReq>> & { headers?: HeadersOption } = {},
      ): Stage => ({
        kind: 'slowDown',
        options: { window: '10s', delayAfter: 2, delay: 5000, store, clock, timers, ...extra },
      });

      it('window 10 s, delayAfter 2, delay 5 s: 5 simultaneous → 2 at once, 3 after 5 s, none refused', async () => {
        const t = await start(({ timers, clock, store }) => [throttle(timers, clock, store, { headers: 'draft-10' })]);
        const sent = Array.from({ length: 5 }, () => t.get('/'));
        await until(() => t.starts.length === 2 && t.timers.pending === 3, 'two answered, three delayed');
        await t.timers.advance(4999);
        expect(t.starts).toHaveLength(2);
        await t.timers.advance(1);
        const replies = await all(sent);
        expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
        expect(t.starts.map((s) => s.at)).toEqual([0, 0, 5000, 5000, 5000]);
        // The throttle's own figures when asked for: q = delayAfter, w = window, r = arrivals
        // left, never 0 (a throttle never refuses, and r=0 tells clients to stop).
        for (const r of replies) expect(r.headers['ratelimit-policy']).toBe('"slow-down";q=2;w=10');
        const remaining = replies.map((r) => /r=(\d+)/.exec(String(r.headers.ratelimit))?.[1]).sort();
        expect(remaining).toEqual(['1', '1', '1', '1', '1']);
        for (const r of replies) expect(r.headers.ratelimit).toMatch(/;t=10$/);
      });

      it('delay hits² s after 2: 4 simultaneous → 0, 0, 9 s, 16 s; again every 15 s → the same pattern', async () => {
        const t = await start(({ timers, clock, store }) => [
          throttle(timers, clock, store, { delay: (hits: number) => hits * hits * 1000 }),
        ]);
        const sent: Sent[] = [];
        // Rounds overlap: round k starts at 15k s while round k-1's last request still waits.
        for (let round = 0; round < 3; round++) {
          const before = t.starts.length;
          for (let i = 0; i < 4; i++) sent.push(t.get(`/r${round}`));
          await until(() => t.starts.length === before + 2 && t.timers.pending === (round > 0 ? 3 : 2), `round ${round}: two answered`);
          await t.timers.advance(15_000);
        }
        await t.timers.advance(1000);
        expect((await all(sent)).map((r) => r.status)).toEqual(Array(12).fill(200));
        for (let round = 0; round < 3; round++) {
          const mine = t.starts.filter((s) => s.path === `/r${round}`).map((s) => s.at - round * 15_000);
          expect(mine, `round ${round}`).toEqual([0, 0, 9000, 16_000]);
        }
      });

      it('a client that disconnects while delayed: its timer is cleared and its handler never runs (real socket)', async () => {
        const t = await start(({ timers, clock, store }) => [throttle(timers, clock, store, { delayAfter: 0 })]);
        const gone = t.get('/gone');
        const stays = t.get('/stays');
        await until(() => t.timers.pending === 2, 'both delayed');
        gone.hangUp();
        await until(() => t.timers.pending === 1, 'the timer of the client that left is cleared');
        await t.timers.advance(10_000);
        expect((await stays.reply).status).toBe(200);
        await expect(gone.reply).rejects.toThrow();
        expect(t.starts.map((s) => s.path)).toEqual(['/stays']);
      });

      it('per-request timers, no queue: a later arrival with a shorter delay completes first', async () => {
        const t = await start(({ timers, clock, store }) => [
          throttle(timers, clock, store, { delayAfter: 1, delay: (hits: number) => (hits === 2 ? 8000 : 2000) }),
        ]);
        const first = t.get('/1');
        await until(() => t.starts.length === 1, 'first answered');
        const second = t.get('/2');
        await until(() => t.timers.pending === 1, 'second delayed');
        const third = t.get('/3');
        await until(() => t.timers.pending === 2, 'third delayed');
        await t.timers.advance(8000);
        await all([first, second, third]);
        expect(t.starts.map((s) => [s.path, s.at])).toEqual([
          ['/1', 0],
          ['/3', 2000],
          ['/2', 8000],
        ]);
      });

      it('throttle then limiter: the limiter counts at processing time, so a request delayed past a later one is refused', async () => {
        // docs/slow-down.md walks through this timeline.
        const t = await start(({ timers, clock, store }) => [
          throttle(timers, clock, store, { delayAfter: 1, delay: (hits: number) => (hits - 1) * 1000, headers: 'draft-10' }),
          {
            kind: 'rateLimit',
            options: {
              rules: [{ name: 'api', key: constant('all'), limit: 3, window: '10s', algorithm: 'fixed-window' }],
              store,
              clock,
              timers,
            },
          },
        ]);
        // X (127.0.0.2) sends three at t=0: the throttle delays them 0, 1 s and 2 s. (One after
        // the other, so that they reach the server in this order.)
        const x: Sent[] = [];
        x.push(t.get('/x1', { from: '127.0.0.2' }));
        await until(() => t.starts.length === 1, 'x1 answered');
        x.push(t.get('/x2', { from: '127.0.0.2' }));
        await until(() => t.timers.pending === 1, 'x2 delayed');
        x.push(t.get('/x3', { from: '127.0.0.2' }));
        await until(() => t.timers.pending === 2, 'x3 delayed');
        await t.timers.advance(500);
        // Y (127.0.0.3) arrives at 0.5 s, after all of X's requests, and is not delayed.
        const y = t.get('/y1', { from: '127.0.0.3' });
        await until(() => t.starts.length === 2, 'y1 answered');
        // Step by step: with Redis each decision is a real round trip, done before time moves on.
        await t.timers.advance(500);
        await until(() => t.starts.length === 3, 'x2 answered');
        await t.timers.advance(1000);
        const [x1, x2, x3] = await all(x);
        const y1 = await y.reply;
        expect([x1?.status, y1.status, x2?.status, x3?.status]).toEqual([200, 200, 200, 429]);
        expect(t.starts.map((s) => [s.path, s.at])).toEqual([
          ['/x1', 0],
          ['/y1', 500],
          ['/x2', 1000],
        ]);
        // x3 arrived before y1 but reached the limiter 1.5 s later; the window it is refused
        // in started when the first request was processed, so Retry-After counts from t=2 s.
        expect(x3?.headers['retry-after']).toBe('8');
        // Both the throttle's and the limiter's items are on the response, appended.
        expect(x3?.headers['ratelimit-policy']).toBe('"slow-down";q=1;w=10, "api";q=3;w=10');
      });
    });

    describe('leaky-bucket queue', () => {
      const queueRule: Rule<AnyReq> = {
        name: 'queue',
        key: constant('backend'),
        algorithm: 'leaky-bucket',
        mode: 'queue',
        limit: 2,
        window: '1s',
        queue: 6,
      };

      it('9 simultaneous, queue 6, 2/s → 6 handler starts 0.5 s apart, 3 refused with 429', async () => {
        const t = await start(({ timers, clock, store }) => [{ kind: 'rateLimit', options: { rules: [queueRule], store, clock, timers } }]);
        const sent = Array.from({ length: 9 }, () => t.get('/'));
        await until(() => t.timers.pending === 6, 'six waiting');
        await t.timers.advance(499);
        expect(t.starts).toHaveLength(0);
        await t.timers.advance(3000);
        const replies = await all(sent);
        expect(replies.filter((r) => r.status === 200)).toHaveLength(6);
        const refused = replies.filter((r) => r.status === 429);
        expect(refused).toHaveLength(3);
        for (const r of refused) expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
        // The backend never sees more than 2 per second: starts exactly T = 0.5 s apart.
        expect(t.starts.map((s) => s.at)).toEqual([500, 1000, 1500, 2000, 2500, 3000]);
      });

      it('a queued request whose client leaves never runs; its place stays spent (nothing scheduled is released)', async () => {
        const t = await start(({ timers, clock, store }) => [{ kind: 'rateLimit', options: { rules: [queueRule], store, clock, timers } }]);
        const a = t.get('/a');
        await until(() => t.timers.pending === 1, 'a waiting');
        const b = t.get('/b');
        await until(() => t.timers.pending === 2, 'b waiting');
        b.hangUp();
        await until(() => t.timers.pending === 1, "b's wait is cancelled");
        const c = t.get('/c');
        await until(() => t.timers.pending === 2, 'c waiting');
        await t.timers.advance(2000);
        await all([a, c]);
        await expect(b.reply).rejects.toThrow();
        expect(t.starts.map((s) => [s.path, s.at])).toEqual([
          ['/a', 500],
          ['/c', 1500],
        ]);
      });
    });

    describe('concurrency', () => {
      const slow: Behaviour = { kind: 'slow', ms: 1000 };

      function tracker(t: { starts: unknown[] }) {
        return t;
      }

      it('max 3 per key, 10 parallel slow requests with a queue: exactly 3 run at once; every slot free afterwards', async () => {
        let running = 0;
        let peak = 0;
        const t = await start(
          ({ timers, slots }) => [{ kind: 'concurrency', options: { max: 3, queue: 7, queueTimeout: '1m', store: slots, timers } }],
          () => slow,
        );
        const sent = Array.from({ length: 10 }, () => t.get('/'));
        await until(() => t.starts.length === 3, 'three running');
        running = 3;
        peak = 3;
        for (let wave = 1; wave <= 3; wave++) {
          const before = t.starts.length;
          await t.timers.advance(1000);
          await until(() => t.starts.length === Math.min(10, before + 3), `wave ${wave}`);
          running = t.starts.length - before;
          peak = Math.max(peak, running);
        }
        await t.timers.advance(1000);
        const replies = await all(sent);
        expect(replies.map((r) => r.status)).toEqual(Array(10).fill(200));
        expect(tracker(t).starts.map((s) => (s as { at: number }).at)).toEqual([0, 0, 0, 1000, 1000, 1000, 2000, 2000, 2000, 3000]);
        expect(peak).toBe(3);
        await until(async () => (await t.slots.count('tg-cc:concurrency:127.0.0.1')) === 0, 'all slots free');
      });

      it('without a queue: 3 run, 7 are refused 429 with qu="concurrent-requests" and Retry-After', async () => {
        const t = await start(
          ({ timers, slots }) => [{ kind: 'concurrency', options: { max: 3, store: slots, timers } }],
          () => slow,
        );
        const sent = Array.from({ length: 10 }, () => t.get('/'));
        let answered = 0;
        // A failed reply is reported by all(sent) below, not as an unhandled rejection here.
        for (const s of sent) s.reply.then(() => answered++).catch(() => {});
        await until(() => t.starts.length === 3 && answered === 7, 'three running, seven refused');
        await t.timers.advance(1000);
        const replies = await all(sent);
        expect(replies.filter((r) => r.status === 200)).toHaveLength(3);
        const refused = replies.filter((r) => r.status === 429);
        expect(refused).toHaveLength(7);
        for (const r of refused) {
          expect(r.headers['retry-after']).toBe('1');
          expect(r.headers['ratelimit-policy']).toBe('"concurrency";q=3;qu="concurrent-requests"');
          expect(r.headers.ratelimit).toBe('"concurrency";r=0');
          expect(r.body['violated-policies']).toEqual(['concurrency']);
        }
        const ok = replies.filter((r) => r.status === 200).map((r) => r.headers.ratelimit);
        expect(ok.sort()).toEqual(['"concurrency";r=0', '"concurrency";r=1', '"concurrency";r=2']);
        await until(async () => (await t.slots.count('tg-cc:concurrency:127.0.0.1')) === 0, 'all slots free');
      });

      it('a global refusal is 503 (the server is the reason)', async () => {
        const t = await start(
          ({ timers, slots }) => [{ kind: 'concurrency', options: { max: 5, global: 2, store: slots, timers } }],
          () => slow,
        );
        const sent = [t.get('/', { from: '127.0.0.2' }), t.get('/', { from: '127.0.0.3' })];
        await until(() => t.starts.length === 2, 'two running');
        const third = await t.get('/', { from: '127.0.0.4' }).reply;
        expect(third.status).toBe(503);
        expect(third.headers['retry-after']).toBe('1');
        expect(third.body.type).toBe('https://iana.org/assignments/http-problem-types#temporary-reduced-capacity');
        await t.timers.advance(1000);
        await all(sent);
        await until(async () => (await t.slots.count('tg-cc:concurrency:*')) === 0, 'global slots free');
      });

      it('slots are released exactly once for aborted requests, thrown errors and streamed responses', async () => {
        const t = await start(
          ({ timers, slots }) => [{ kind: 'concurrency', options: { max: 1, store: slots, timers } }],
          (path) =>
            path === '/throw'
              ? { kind: 'throw' }
              : path === '/stream'
                ? { kind: 'stream', chunks: 3, everyMs: 1000 }
                : path === '/slow'
                  ? slow
                  : { kind: 'ok' },
        );
        const key = 'tg-cc:concurrency:127.0.0.1';
        // Aborted: the client leaves while the handler runs; the slot frees without a response.
        const aborted = t.get('/slow');
        await until(() => t.starts.length === 1, 'slow running');
        expect(await t.slots.count(key)).toBe(1);
        aborted.hangUp();
        await until(async () => (await t.slots.count(key)) === 0, 'slot freed by close');
        // Thrown: the framework answers 500 and the slot frees.
        expect((await t.get('/throw').reply).status).toBe(500);
        await until(async () => (await t.slots.count(key)) === 0, 'slot freed after error');
        // Streamed: the slot is held until the last chunk, then freed.
        const stream = t.get('/stream');
        await until(() => t.starts.length === 3, 'stream started');
        await t.timers.advance(1000);
        expect((await t.get('/ok').reply).status).toBe(429);
        await t.timers.advance(2000);
        expect((await stream.reply).text).toBe('chunk0chunk1chunk2');
        await until(async () => (await t.slots.count(key)) === 0, 'slot freed after stream');
        expect((await t.get('/ok').reply).status).toBe(200);
        await t.timers.advance(1000); // the aborted slow handler's own timer
      });
    });

    describe('diagnostics and store failures', () => {
      it('delays and refusals by the controls are published on tollgate:delayed and tollgate:rejected', async () => {
        const delayed: Array<{ limiter: string; decision: { delayMs: number } }> = [];
        const rejected: Array<{ limiter: string; decision: { rejectedBy: string[]; retryAfterMs: number } }> = [];
        const onDelayed = (m: unknown) => delayed.push(m as (typeof delayed)[number]);
        const onRejected = (m: unknown) => rejected.push(m as (typeof rejected)[number]);
        diagnosticsChannel.subscribe('tollgate:delayed', onDelayed);
        diagnosticsChannel.subscribe('tollgate:rejected', onRejected);
        try {
          const t = await start(
            ({ timers, clock, store, slots }) => [
              { kind: 'shed', options: { maxInFlight: 2 } },
              { kind: 'slowDown', options: { window: '10s', delayAfter: 1, delay: 1000, store, clock, timers } },
              { kind: 'concurrency', options: { max: 1, store: slots, timers } },
            ],
            () => ({ kind: 'slow', ms: 5000 }),
          );
          const first = t.get('/');
          await until(() => t.starts.length === 1, 'first running');
          const second = t.get('/');
          await until(() => delayed.length === 1, 'second delayed');
          expect(delayed.map((m) => [m.limiter, m.decision.delayMs])).toEqual([['slow-down', 1000]]);
          expect((await t.get('/').reply).status).toBe(503); // two in flight: shed
          await t.timers.advance(1000);
          expect((await second.reply).status).toBe(429); // the slot is taken
          await t.timers.advance(4000);
          await first.reply;
          expect(rejected.map((m) => [m.limiter, m.decision.rejectedBy, m.decision.retryAfterMs])).toEqual([
            ['shed', ['shed'], 1000],
            ['concurrency', ['concurrency'], 1000],
          ]);
        } finally {
          diagnosticsChannel.unsubscribe('tollgate:delayed', onDelayed);
          diagnosticsChannel.unsubscribe('tollgate:rejected', onRejected);
        }
      });

      it('a failing slot store lets requests through without a slot, and says so on tollgate:store-error', async () => {
        const seen: unknown[] = [];
        const listener = (m: unknown) => seen.push(m);
        diagnosticsChannel.subscribe('tollgate:store-error', listener);
        try {
          const broken: SlotStore = {
            leases: false,
            shared: false,
            acquire: () => Promise.reject(new Error('slot store down')),
            release: () => Promise.resolve(),
            renew: () => Promise.resolve(false),
            count: () => Promise.resolve(0),
            close: () => Promise.resolve(),
          };
          const t = await start(({ timers }) => [{ kind: 'concurrency', options: { max: 1, store: broken, timers } }]);
          expect((await t.get('/').reply).status).toBe(200);
          expect(seen).toHaveLength(1);
          expect(seen[0]).toMatchObject({ limiter: 'concurrency', action: 'allow' });
        } finally {
          diagnosticsChannel.unsubscribe('tollgate:store-error', listener);
        }
      });
    });

    describe('load shedding', () => {
      it('503 with Retry-After at maxInFlight, decided first; admitted again once requests finish', async () => {
        const t = await start(
          ({ timers, slots }) => [
            { kind: 'shed', options: { maxInFlight: 2, retryAfter: '2s' } },
            { kind: 'concurrency', options: { max: 100, store: slots, timers } },
          ],
          () => ({ kind: 'slow', ms: 1000 }),
        );
        const sent = [t.get('/'), t.get('/')];
        await until(() => t.starts.length === 2, 'two running');
        const shedReply = await t.get('/').reply;
        expect(shedReply.status).toBe(503);
        expect(shedReply.headers['retry-after']).toBe('2');
        expect(shedReply.headers['cache-control']).toBe('no-store');
        // Decided before anything expensive: the concurrency stage behind never saw it.
        expect(shedReply.headers['ratelimit-policy']).toBeUndefined();
        await t.timers.advance(1000);
        await all(sent);
        const after = t.get('/');
        await until(() => t.starts.length === 3, 'admitted again');
        await t.timers.advance(1000);
        expect((await after.reply).status).toBe(200);
      });

      it('fair shedding over HTTP: one tenant floods, thirty small tenants keep ≥ 95% success once they are known', async () => {
        const t = await start(
          ({ clock }) => [{ kind: 'shed', options: { maxInFlight: 100, tenant: byHeader('x-tenant'), clock } }],
          () => ({ kind: 'slow', ms: 100 }),
        );
        const rounds: Array<{ small: number; smallOk: number; big: number; bigOk: number }> = [];
        let decided = 0;
        let fired = 0;
        const pending: Promise<void>[] = [];
        for (let round = 0; round < 6; round++) {
          const r = { small: 0, smallOk: 0, big: 0, bigOk: 0 };
          rounds.push(r);
          const fire = (tenant: string, small: boolean) => {
            fired++;
            if (small) r.small++;
            else r.big++;
            const sent = t.get('/', { headers: { 'x-tenant': tenant } });
            pending.push(
              sent.reply.then((reply) => {
                if (reply.status === 503) decided++;
                else if (small) r.smallOk++;
                else r.bigOk++;
              }),
            );
          };
          // The flood goes out first (150, more than the whole capacity), then the small tenants.
          for (let i = 0; i < 150; i++) fire('big', false);
          await until(() => t.starts.length + decided === fired, `round ${round}: flood decided`);
          for (let s = 0; s < 30; s++) fire(`small-${s}`, true);
          await until(() => t.starts.length + decided === fired, `round ${round} decided`);
          await t.timers.advance(100);
          await until(() => rounds.reduce((n, x) => n + x.smallOk + x.bigOk, 0) + decided === fired, `round ${round} answered`);
        }
        await Promise.all(pending);
        // Round 0: the small tenants are not known yet, so the flood, alone, may take everything.
        const later = rounds.slice(1);
        const small = later.reduce((n, r) => n + r.small, 0);
        const smallOk = later.reduce((n, r) => n + r.smallOk, 0);
        expect(smallOk / small).toBeGreaterThanOrEqual(0.95);
        // The flood is shed: once over its share it holds at most 1 - 2·headroom = 60% of the capacity.
        for (const r of later) expect(r.bigOk).toBeLessThanOrEqual(60);
        expect(rounds[0]?.bigOk).toBe(100);
      });
    });

    describe('rules over HTTP: quotas, counting by outcome, skip, blockFor', () => {
      const limiter = (rules: Rule<AnyReq>[], extra: { skip?: (req: AnyReq) => boolean } = {}) =>
        (({ timers, clock, store }: { timers: ManualTimers; clock: ManualClock; store: Store }) => [
          { kind: 'rateLimit', options: { rules, store, clock, timers, ...extra } },
        ]) as Parameters<typeof start>[0];

      it('a daily quota stacked with a rate rule, both remaining figures in the headers; the quota resets at UTC midnight', async () => {
        const t = await start(
          limiter([
            { name: 'burst', key: constant('k'), rate: '2/s', algorithm: 'fixed-window' },
            { name: 'daily', key: constant('k'), quota: 3, per: 'day' },
          ]),
          undefined,
          Date.UTC(2026, 0, 1, 23, 59, 50),
        );
        const r1 = await t.get('/').reply;
        expect(r1.headers['ratelimit-policy']).toBe('"burst";q=2;w=1, "daily";q=3;w=86400');
        expect(r1.headers.ratelimit).toBe('"burst";r=1;t=1, "daily";r=2;t=10');
        await t.timers.advance(2000);
        expect((await t.get('/').reply).headers.ratelimit).toMatch(/"daily";r=1;t=8$/);
        await t.timers.advance(2000);
        expect((await t.get('/').reply).status).toBe(200);
        await t.timers.advance(2000);
        const over = await t.get('/').reply;
        expect(over.status).toBe(429);
        expect(over.body['violated-policies']).toEqual(['daily']);
        expect(over.headers['retry-after']).toBe('4');
        await t.timers.advance(4000); // 00:00:00 UTC
        const next = await t.get('/').reply;
        expect(next.status).toBe(200);
        expect(next.headers.ratelimit).toMatch(/"daily";r=2;t=86400$/);
      });

      it('a monthly quota follows UTC calendar months', async () => {
        const t = await start(
          limiter([{ name: 'monthly', key: constant('k'), quota: 1, per: 'month' }]),
          undefined,
          Date.UTC(2026, 1, 28, 12),
        );
        expect((await t.get('/').reply).status).toBe(200);
        const over = await t.get('/').reply;
        expect(over.status).toBe(429);
        expect(over.headers['retry-after']).toBe(String(12 * 3600));
        await t.timers.advance(12 * 3600 * 1000);
        expect((await t.get('/').reply).status).toBe(200);
      });

      it('skipFailed: responses of 400 and above are refunded, exactly, even when concurrent', async () => {
        const t = await start(
          limiter([{ name: 'api', key: constant('k'), limit: 5, window: '1m', algorithm: 'fixed-window', skipFailed: true }]),
          (path) => (path === '/fail' ? { kind: 'status', status: 500 } : { kind: 'ok' }),
        );
        // 5 failures at once: each is counted on arrival, refunded after its response.
        const fails = await all(Array.from({ length: 5 }, () => t.get('/fail')));
        expect(fails.map((r) => r.status)).toEqual(Array(5).fill(500));
        await t.givenBack(5);
        const oks = await all(Array.from({ length: 6 }, () => t.get('/ok')));
        expect(oks.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 429]);
      });

      it('skipSuccessful: only failures count (failed logins)', async () => {
        const t = await start(limiter([{ name: 'login', key: constant('k'), limit: 2, window: '15m', skipSuccessful: true }]), (path) =>
          path === '/bad' ? { kind: 'status', status: 401 } : { kind: 'ok' },
        );
        for (let i = 0; i < 5; i++) expect((await t.get('/good').reply).status).toBe(200);
        await t.givenBack(5);
        expect((await t.get('/bad').reply).status).toBe(401);
        expect((await t.get('/bad').reply).status).toBe(401);
        expect((await t.get('/good').reply).status).toBe(429);
      });

      it('countIf decides per status', async () => {
        const t = await start(
          limiter([{ name: 'writes', key: constant('k'), limit: 1, window: '1m', countIf: (status: number) => status === 201 }]),
          (path) => (path === '/created' ? { kind: 'status', status: 201 } : { kind: 'status', status: 409 }),
        );
        for (let i = 0; i < 3; i++) expect((await t.get('/conflict').reply).status).toBe(409);
        await t.givenBack(3);
        expect((await t.get('/created').reply).status).toBe(201);
        expect((await t.get('/created').reply).status).toBe(429);
      });

      it('skip (an allow-list) bypasses every rule', async () => {
        const t = await start(
          limiter([{ name: 'ip', limit: 1, window: '1m' }], { skip: (req: AnyReq) => req.headers['x-api-key'] === 'internal' }),
        );
        expect((await t.get('/').reply).status).toBe(200);
        expect((await t.get('/').reply).status).toBe(429);
        const allowed = await t.get('/', { headers: { 'x-api-key': 'internal' } }).reply;
        expect(allowed.status).toBe(200);
        expect(allowed.headers['ratelimit-policy']).toBeUndefined();
      });

      it('blockFor: 5 logins per 15 min, then blocked for 1 h', async () => {
        const t = await start(
          limiter([{ name: 'login', limit: 5, window: '15m', algorithm: 'fixed-window', blockFor: '1h' }]),
          undefined,
          0,
        );
        for (let i = 0; i < 5; i++) expect((await t.get('/login').reply).status).toBe(200);
        const sixth = await t.get('/login').reply;
        expect(sixth.status).toBe(429);
        expect(sixth.headers['retry-after']).toBe('3600');
        // The 15-minute window has long turned over, but the block holds for the hour.
        await t.timers.advance(59 * 60 * 1000);
        const blocked = await t.get('/login').reply;
        expect(blocked.status).toBe(429);
        expect(blocked.headers['retry-after']).toBe('60');
        await t.timers.advance(60 * 1000);
        expect((await t.get('/login').reply).status).toBe(200);
      });
    });

    describe('allow lists on the controls', () => {
      it('slowDown: an allowed client is never delayed nor counted; a spoofed X-Forwarded-For is not allowed', async () => {
        const t = await start(({ timers, clock, store }) => [
          { kind: 'slowDown', options: { window: '10s', delayAfter: 0, delay: 1000, store, clock, timers, allow: ['127.0.0.2'] } },
        ]);
        for (let i = 0; i < 3; i++) expect((await t.get('/', { from: '127.0.0.2' }).reply).status).toBe(200);
        expect(t.timers.pending).toBe(0);
        const held = t.get('/', { headers: { 'x-forwarded-for': '127.0.0.2' } });
        await until(() => t.timers.pending === 1, 'the spoofing request is delayed');
        await t.timers.advance(1000);
        expect((await held.reply).status).toBe(200);
        expect(t.starts.map((s) => s.at)).toEqual([0, 0, 0, 1000]);
      });

      it('concurrency: an allowed client takes no slot; a non-boolean from an allow function goes to the error handler', async () => {
        const t = await start(
          ({ timers, slots }) => [
            {
              kind: 'concurrency',
              options: {
                max: 1,
                store: slots,
                timers,
                allow: (req: AnyReq) => (req.headers['x-odd'] ? 'yes' : req.headers['x-internal'] === 'yes'),
              },
            },
          ],
          (path) => (path === '/slow' ? { kind: 'slow', ms: 1000 } : { kind: 'ok' }),
        );
        const slow = t.get('/slow');
        await until(() => t.starts.length === 1, 'the slot is taken');
        expect((await t.get('/').reply).status).toBe(429);
        expect((await t.get('/', { headers: { 'x-internal': 'yes' } }).reply).status).toBe(200);
        expect((await t.get('/', { headers: { 'x-odd': '1' } }).reply).status).toBe(500);
        await t.timers.advance(1000);
        expect((await slow.reply).status).toBe(200);
      });
    });

    describe('regressions: hostile clients and misused callbacks', () => {
      /** Several HTTP/1.1 requests in one write, then the connection closes at once. */
      async function pipelinedThenClose(port: number, paths: string[]): Promise<void> {
        const socket = net.connect({ port, host: '127.0.0.1' });
        await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
        socket.write(paths.map((p) => `GET ${p} HTTP/1.1\r\nHost: x\r\n\r\n`).join(''));
        await new Promise((r) => setTimeout(r, 50));
        socket.destroy();
      }

      it('pipelined requests and a disconnect: concurrency slots are released exactly once', async () => {
        const t = await start(
          ({ timers, slots }) => [{ kind: 'concurrency', options: { global: 2, store: slots, timers } }],
          (path) => (path === '/slow' ? { kind: 'slow', ms: 60_000 } : { kind: 'ok' }),
        );
        await pipelinedThenClose(t.port, ['/slow', '/slow', '/slow']);
        await until(async () => (await t.slots.count('tg-cc:concurrency:*')) === 0, 'every slot released');
        // Everyone else is admitted again, and the count never went below zero.
        expect((await t.get('/ok').reply).status).toBe(200);
        expect((await t.get('/ok').reply).status).toBe(200);
        expect(await t.slots.count('tg-cc:concurrency:*')).toBe(0);
        await t.timers.advance(60_000);
      });

      it('pipelined requests and a disconnect: shed in-flight counts are released', async () => {
        const t = await start(
          () => [{ kind: 'shed', options: { maxInFlight: 2 } }],
          (path) => (path === '/slow' ? { kind: 'slow', ms: 60_000 } : { kind: 'ok' }),
        );
        await pipelinedThenClose(t.port, ['/slow', '/slow', '/slow']);
        await until(() => t.starts.length >= 2, 'the pipelined requests ran');
        await new Promise((r) => setTimeout(r, 50));
        // Had the abandoned requests stayed in flight, this pair would exceed maxInFlight.
        const one = t.get('/slow');
        await until(() => t.starts.length >= 3, 'one more in flight');
        expect((await t.get('/ok').reply).status).toBe(200);
        await t.timers.advance(60_000);
        expect((await one.reply).status).toBe(200);
      });

      it('pipelined requests and a disconnect: requests held by slowDown never reach the handler', async () => {
        const t = await start(({ timers, clock, store }) => [
          { kind: 'slowDown', options: { window: '10s', delayAfter: 0, delay: 1000, store, clock, timers } },
        ]);
        await pipelinedThenClose(t.port, ['/a', '/b', '/c']);
        await until(() => t.timers.pending === 0, 'held requests cancelled');
        await t.timers.advance(5000);
        expect(t.starts).toEqual([]);
      });

      it('pipelined requests and a disconnect: requests held in a leaky-bucket queue never reach the handler', async () => {
        const t = await start(({ timers, clock, store }) => [
          {
            kind: 'rateLimit',
            options: {
              rules: [{ name: 'q', key: constant('q'), algorithm: 'leaky-bucket', mode: 'queue', limit: 10, window: '10s' }],
              store,
              clock,
              timers,
            },
          },
        ]);
        await pipelinedThenClose(t.port, ['/a', '/b', '/c']);
        await until(() => t.timers.pending === 0, 'queued requests cancelled');
        await t.timers.advance(5000);
        // The first departs at once (no wait); the queued ones never run.
        expect(t.starts.length).toBeLessThanOrEqual(1);
      });

      it('throwing callbacks in concurrency go to the error handler, never through', async () => {
        const t = await start(({ timers, slots }) => [
          {
            kind: 'concurrency',
            options: {
              max: 1,
              store: slots,
              timers,
              key: () => {
                throw new Error('key bug');
              },
            },
          },
        ]);
        expect((await t.get('/').reply).status).toBe(500);
        expect(t.starts).toEqual([]);
      });

      it('throwing callbacks in slowDown go to the error handler, never through', async () => {
        const t = await start(({ timers, clock, store }) => [
          {
            kind: 'slowDown',
            options: {
              window: '10s',
              delayAfter: 0,
              store,
              clock,
              timers,
              skip: () => {
                throw new Error('skip bug');
              },
            },
          },
        ]);
        expect((await t.get('/').reply).status).toBe(500);
        expect(t.starts).toEqual([]);
      });

      it('an async skip does not switch slowDown off', async () => {
        const t = await start(({ timers, clock, store }) => [
          {
            kind: 'slowDown',
            options: {
              window: '10s',
              delayAfter: 0,
              delay: 1000,
              store,
              clock,
              timers,
              skip: async (req: AnyReq) => req.url === '/health',
            },
          },
        ]);
        const held = t.get('/');
        await until(() => t.timers.pending === 1, 'the request is delayed');
        expect((await t.get('/health').reply).status).toBe(200);
        await t.timers.advance(1000);
        expect((await held.reply).status).toBe(200);
        expect(t.starts.map((s) => [s.path, s.at])).toEqual([
          ['/health', 0],
          ['/', 1000],
        ]);
      });

      it('a delay function returning a promise is awaited; one returning undefined is a coded error', async () => {
        const t = await start(({ timers, clock, store }) => [
          {
            kind: 'slowDown',
            options: {
              window: '10s',
              delayAfter: 0,
              store,
              clock,
              timers,
              delay: ((_hits: number, req: AnyReq) => (req.url === '/bad' ? undefined : Promise.resolve(2000))) as never,
            },
          },
        ]);
        const held = t.get('/');
        await until(() => t.timers.pending === 1, 'the request is delayed');
        await t.timers.advance(1999);
        expect(t.starts).toEqual([]);
        await t.timers.advance(1);
        expect((await held.reply).status).toBe(200);
        expect((await t.get('/bad').reply).status).toBe(500);
      });

      it('an async key does not make every client share one key ([object Promise])', async () => {
        const t = await start(({ timers, clock, store }) => [
          {
            kind: 'rateLimit',
            options: {
              rules: [{ name: 'user', key: async (req: AnyReq) => req.headers['x-user'], limit: 1, window: '1m' }],
              store,
              clock,
              timers,
            },
          },
        ]);
        expect((await t.get('/', { headers: { 'x-user': 'alice' } }).reply).status).toBe(200);
        expect((await t.get('/', { headers: { 'x-user': 'bob' } }).reply).status).toBe(200);
        expect((await t.get('/', { headers: { 'x-user': 'alice' } }).reply).status).toBe(429);
      });

      it('user() returning an object is a coded error, not a rule switched off', async () => {
        const t = await start(({ timers, clock, store }) => [
          {
            kind: 'rateLimit',
            options: {
              rules: [{ name: 'user', key: user((req: AnyReq) => ({ id: req.headers['x-user'] })), limit: 1, window: '1m' }],
              store,
              clock,
              timers,
            },
          },
        ]);
        expect((await t.get('/', { headers: { 'x-user': 'alice' } }).reply).status).toBe(500);
        expect(t.starts).toEqual([]);
      });

      it('an async message is sent, not {}', async () => {
        const t = await start(({ timers, clock, store }) => [
          {
            kind: 'rateLimit',
            options: {
              rules: [{ name: 'ip', limit: 1, window: '1m' }],
              store,
              clock,
              timers,
              message: async () => ({ error: 'slow down' }),
            },
          },
        ]);
        expect((await t.get('/').reply).status).toBe(200);
        const refused = await t.get('/').reply;
        expect(refused.status).toBe(429);
        expect(refused.body).toEqual({ error: 'slow down' });
      });

      it('a throttle never announces r=0 (polite clients keep sending)', async () => {
        const t = await start(({ timers, clock, store }) => [
          { kind: 'slowDown', options: { window: '10s', delayAfter: 1, delay: 500, store, clock, timers } },
        ]);
        expect((await t.get('/').reply).headers.ratelimit).toBeUndefined();
        const held = t.get('/');
        await until(() => t.timers.pending === 1, 'delayed');
        await t.timers.advance(500);
        const r = await held.reply;
        expect(r.status).toBe(200);
        expect(r.headers.ratelimit ?? '').not.toMatch(/r=0/);
      });
    });
  });
}
