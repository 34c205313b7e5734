/**
 * The failing-callback suite: every port, mounted with every kind of failing user
 * callback (key, cost, skip, tier, limit, message, handler, onRejected, onStoreError, the
 * allow and deny functions, the controls' key, delay, skip, tenant and priority (limitRate's
 * key and skip too), and
 * node's onError), each throwing, rejecting or returning a wrong value. For each it
 * asserts that every request got an answer (the app's error handler's 500, with the
 * coded `TG_INVALID_CALLBACK_RESULT` where the value was wrong) and that no
 * `unhandledRejection` or `uncaughtException` fired.
 *
 * A port joins with one {@link FailingPort} entry: `makeApp(spec)` mounts the control
 * (when `spec.control` is set) then the limiter with `spec.rateLimit` as its options,
 * answers `GET /` with 200 when the request gets through, and answers an error reaching
 * the app's error handler with 500 and the JSON body `{ code }` (`err.code` or null), or
 * throws from that handler when `spec.errorHandlerFails`.
 */
import { type Decision, ManualClock, type Store, type StoreDecision } from '@tollgate/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Reply, send } from '../setup/http.js';

export interface FailSpec {
  /** The limiter's options (rules, tiers, tier, skip, message, ...), as given. */
  rateLimit: Record<string, unknown>;
  /** A refusal handler, in port-neutral form: the port calls it with the request and decision. */
  handler?: (req: unknown, decision: Decision) => unknown;
  /** A control mounted before the limiter. */
  control?: { kind: 'slowDown' | 'concurrency' | 'shed' | 'limitRate'; options: Record<string, unknown> };
  /** The app's error handler fails too (throws): the framework's own 500 answers. */
  errorHandlerFails?: boolean;
  /** The node port's `onError` (ports without one are not run with it). */
  onError?: (err: unknown) => unknown;
}

export interface FailingApp {
  port: number;
  close(): Promise<void>;
}

export interface FailingPort {
  name: string;
  /** Whether the port has an `onError` option of its own (the node adapter's async form). */
  onError: boolean;
  makeApp(spec: FailSpec): Promise<FailingApp>;
}

/** What an app's error handler answers: 500 and the error's code. */
export function errorBody(err: unknown): { code: string | null } {
  const code = (err as { code?: unknown } | null)?.code;
  return { code: typeof code === 'string' ? code : null };
}

const BOOM = 'APP_BOOM';
const boom = (): never => {
  throw Object.assign(new Error('boom'), { code: BOOM });
};
const rejects = async (): Promise<never> => boom();
const circular = (): object => {
  const c: Record<string, unknown> = { a: 1 };
  c.self = c;
  return c;
};

/** What a callback does: each kind of failure a user's function can have. */
interface Variant {
  name: string;
  fn: () => unknown;
  /** The code the error handler sees. */
  code: string | null;
}

const throws: Variant = { name: 'throws', fn: boom, code: BOOM };
const rejectsV: Variant = { name: 'rejects', fn: rejects, code: BOOM };
const rejectsNonError: Variant = { name: 'rejects with a non-Error', fn: () => Promise.reject('plain string'), code: null };
const thenableThrows: Variant = {
  name: 'returns a thenable whose then throws',
  fn: () => ({
    // biome-ignore lint/suspicious/noThenProperty: a broken thenable is the point
    then() {
      boom();
    },
  }),
  code: BOOM,
};
const failures = [throws, rejectsV, rejectsNonError, thenableThrows];

const INVALID = 'TG_INVALID_CALLBACK_RESULT';
/** Wrong values, each returned as is and as a promise of it. */
function wrong(...values: [string, () => unknown][]): Variant[] {
  return values.flatMap(([name, v]) => [
    { name: `returns ${name}`, fn: v, code: INVALID },
    { name: `resolves to ${name}`, fn: async () => v(), code: INVALID },
  ]);
}

interface Case {
  callback: string;
  variant: Variant;
  spec: FailSpec;
  /** Requests sent one after the other; the last one is checked (a refusal needs a second). */
  requests: number;
  /** The last request's expected status (default 500). */
  status?: number;
  /** The requests' headers. */
  headers?: Record<string, string>;
  /** Only ports with their own onError. */
  onError?: boolean;
}

const rule = (extra: Record<string, unknown> = {}) => ({ name: 'r', limit: 1, window: '1h', ...extra });
/** A clock that stands still, for the cases whose second request must be refused wherever an hour ends. */
const still = () => new ManualClock(0);

/** A store that fails every decision (the `onStoreError` function's cases). */
export function failingStore(): Store {
  const fail = () => Promise.reject(new Error('store down'));
  return {
    consume: fail as () => Promise<StoreDecision>,
    peek: fail,
    refund: fail,
    reset: fail,
    close: async () => {},
  };
}

function cases(): Case[] {
  const out: Case[] = [];
  const add = (callback: string, variants: Variant[], spec: (fn: () => unknown) => FailSpec, requests = 1, extra: Partial<Case> = {}) => {
    for (const variant of variants) out.push({ callback, variant, spec: spec(variant.fn), requests, ...extra });
  };
  add(
    'rules[].key',
    [
      ...failures,
      ...wrong(['an object', () => ({ id: 1 })], ['NaN', () => Number.NaN], ['a circular object', circular], ['true', () => true]),
    ],
    (fn) => ({ rateLimit: { rules: [rule({ key: fn })] } }),
  );
  add(
    'rules[].cost',
    [...failures, ...wrong(['a string', () => '2'], ['an object', () => ({})], ['undefined', () => undefined], ['a BigInt', () => 1n])],
    (fn) => ({ rateLimit: { rules: [rule({ cost: fn })] } }),
  );
  add(
    'rules[].limit',
    [
      ...failures,
      ...wrong(
        ['NaN', () => Number.NaN],
        ['-1', () => -1],
        ['0', () => 0],
        ['1.5', () => 1.5],
        ['a string', () => '5'],
        ['undefined', () => undefined],
      ),
    ],
    (fn) => ({ rateLimit: { rules: [rule({ limit: fn })] } }),
  );
  add(
    'skip',
    [...failures, ...wrong(['undefined', () => undefined], ['a string', () => 'yes'], ['1', () => 1], ['an object', () => ({})])],
    (fn) => ({ rateLimit: { rules: [rule()], skip: fn } }),
  );
  add(
    'tier',
    [...failures, ...wrong(['no tier', () => 'gold'], ['undefined', () => undefined], ['a number', () => 42], ['an object', () => ({})])],
    (fn) => ({ rateLimit: { rules: [rule()], tiers: { free: [rule({ name: 'free' })] }, tier: fn } }),
  );
  add('allow', [...failures, ...wrong(['a string', () => 'yes'], ['undefined', () => undefined])], (fn) => ({
    rateLimit: { rules: [rule()], allow: fn },
  }));
  add('deny', [...failures, ...wrong(['a string', () => 'yes'], ['undefined', () => undefined])], (fn) => ({
    rateLimit: { rules: [rule()], deny: fn },
  }));
  // Consulted for each hop of X-Forwarded-For.
  add(
    'trustProxy',
    [throws, ...failures.slice(1).map((v) => ({ ...v, code: INVALID }))],
    (fn) => ({ rateLimit: { rules: [rule()], trustProxy: fn } }),
    1,
    { headers: { 'x-forwarded-for': '203.0.113.7' } },
  );
  // A refusal's callbacks: the first request is admitted, the second refused.
  add(
    'message',
    [
      ...failures,
      ...wrong(
        ['undefined', () => undefined],
        ['a number', () => 42],
        ['a BigInt', () => 1n],
        ['a circular object', circular],
        ['an object holding a BigInt', () => ({ n: 1n })],
        ['an object whose toJSON gives undefined', () => ({ toJSON: () => undefined })],
      ),
    ],
    (fn) => ({ rateLimit: { rules: [rule()], message: fn } }),
    2,
  );
  add('rules[].burst', [...failures, ...wrong(['NaN', () => Number.NaN], ['0', () => 0], ['a string', () => '5'])], (fn) => ({
    rateLimit: { rules: [rule({ algorithm: 'token-bucket', burst: fn })] },
  }));
  add('handler', failures, (fn) => ({ rateLimit: { rules: [rule()], clock: still() }, handler: fn }), 2);
  // A hook beside the refusal: a throw is the app's error; a rejection comes after the refusal was sent.
  add('onRejected', [throws], (fn) => ({ rateLimit: { rules: [rule()], clock: still(), onRejected: fn } }), 2);
  add('onRejected', [rejectsV, thenableThrows], (fn) => ({ rateLimit: { rules: [rule()], clock: still(), onRejected: fn } }), 2, {
    status: 429,
  });
  // Counting by outcome runs once the response is over: the answer stands, the request is counted.
  add('rules[].countIf', [throws, rejectsV, thenableThrows], (fn) => ({ rateLimit: { rules: [rule({ countIf: fn })] } }), 1, {
    status: 200,
  });
  add('onStoreError', failures, (fn) => ({ rateLimit: { rules: [rule()], store: failingStore(), onStoreError: fn } }));
  // The controls' callbacks.
  const slowDown = (options: Record<string, unknown>): FailSpec => ({
    rateLimit: { rules: [rule({ limit: 100 })] },
    control: { kind: 'slowDown', options: { window: '1m', delayAfter: 0, ...options } },
  });
  add('slowDown.key', [...failures, ...wrong(['an object', () => ({})])], (fn) => slowDown({ key: fn }));
  add('slowDown.skip', [...failures, ...wrong(['a string', () => 'yes'])], (fn) => slowDown({ skip: fn }));
  add('slowDown.delay', [...failures, ...wrong(['a string', () => '5'], ['an object', () => ({})], ['undefined', () => undefined])], (fn) =>
    slowDown({ delay: fn }),
  );
  const concurrency = (options: Record<string, unknown>): FailSpec => ({
    rateLimit: { rules: [rule({ limit: 100 })] },
    control: { kind: 'concurrency', options: { max: 2, ...options } },
  });
  add('concurrency.key', [...failures, ...wrong(['an object', () => ({})])], (fn) => concurrency({ key: fn }));
  add('concurrency.skip', [...failures, ...wrong(['a string', () => 'yes'])], (fn) => concurrency({ skip: fn }));
  const limitRate = (options: Record<string, unknown>): FailSpec => ({
    rateLimit: { rules: [rule({ limit: 100 })] },
    control: { kind: 'limitRate', options: { rate: '1MB/s', ...options } },
  });
  add('limitRate.key', [...failures, ...wrong(['an object', () => ({})])], (fn) => limitRate({ key: fn }));
  add('limitRate.skip', [...failures, ...wrong(['a string', () => 'yes'])], (fn) => limitRate({ skip: fn }));
  // Shedding decides at once: a promise from its callbacks is a wrong value, never awaited.
  const shed = (options: Record<string, unknown>): FailSpec => ({
    rateLimit: { rules: [rule({ limit: 100 })] },
    control: { kind: 'shed', options: { maxInFlight: 100, ...options } },
  });
  const syncOnly = (v: Variant): Variant => (v === throws ? v : { ...v, code: INVALID });
  const shedVariants = [...failures.map(syncOnly), { name: 'returns an object', fn: () => ({}), code: INVALID }];
  add('shed.tenant', shedVariants, (fn) => shed({ tenant: fn }));
  add('shed.skip', [...shedVariants, { name: 'returns a string', fn: () => 'yes', code: INVALID }], (fn) => shed({ skip: fn }));
  add('shed.priority', [...failures.map(syncOnly), { name: 'returns a string', fn: () => 'high', code: INVALID }], (fn) =>
    shed({ priority: fn }),
  );
  // The app's error handler failing too: the framework's own 500 answers.
  for (const key of [throws, rejectsV]) {
    out.push({
      callback: 'the error handler too (key fails)',
      variant: key,
      spec: { rateLimit: { rules: [rule({ key: key.fn })] }, errorHandlerFails: true },
      requests: 1,
      status: 500,
    });
  }
  // The node adapter's onError failing too: tollgate's own 500 answers.
  const keyFails = [throws, rejectsV];
  for (const key of keyFails) {
    for (const onError of [throws, rejectsV, rejectsNonError]) {
      out.push({
        callback: `onError (key ${key.name})`,
        variant: onError,
        spec: { rateLimit: { rules: [rule({ key: key.fn })] }, onError: onError.fn },
        requests: 1,
        onError: true,
      });
    }
  }
  return out;
}

function withTimeout(reply: Promise<Reply>, ms: number, what: string): Promise<Reply> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([reply, late]).finally(() => clearTimeout(timer));
}

/** Runs every case on every port. */
export function failingCallbackSuite(ports: readonly FailingPort[]): void {
  const escaped: { event: string; reason: unknown }[] = [];
  const onRejection = (reason: unknown) => escaped.push({ event: 'unhandledRejection', reason });
  const onException = (reason: unknown) => escaped.push({ event: 'uncaughtException', reason });
  beforeAll(() => {
    process.on('unhandledRejection', onRejection);
    process.on('uncaughtException', onException);
  });
  afterAll(() => {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
  });
  afterEach(() => {
    escaped.length = 0;
  });

  const all = cases();
  for (const p of ports) {
    describe(p.name, () => {
      for (const c of all) {
        if (c.onError === true && !p.onError) continue;
        it(`${c.callback} ${c.variant.name}: answered, nothing escapes`, async () => {
          const app = await p.makeApp(c.spec);
          try {
            let last: Reply | undefined;
            for (let i = 0; i < c.requests; i++) {
              last = await withTimeout(
                send(app.port, c.headers ? { headers: c.headers } : {}).reply,
                3000,
                `${c.callback} ${c.variant.name}, request ${i + 1}`,
              );
            }
            // Unhandled rejections are reported after the microtask queue drains: two turns.
            await new Promise((r) => setImmediate(r));
            await new Promise((r) => setTimeout(r, 5));
            expect(escaped.map((e) => `${e.event}: ${String((e.reason as Error)?.stack ?? e.reason)}`)).toEqual([]);
            expect(last?.status).toBe(c.status ?? 500);
            if (c.onError !== true && c.status === undefined) expect(last?.body).toEqual({ code: c.variant.code });
          } finally {
            await app.close();
          }
        });
      }
    });
  }
}
