/**
 * What the adapters share around the pipeline: a limiter's methods (`limiterMethods`),
 * several limiters' operations as one (`groupOperations`, Fastify's `app.tollgate`), an
 * option naming one of a list, an adapter's own option checks and peer hints. The
 * adapters' suites run these through Express, Fastify and node; this pins their edges.
 */

import { type Decision, ManualClock, type Rule } from '@tollgate/core';
import {
  choiceOption,
  createRateLimit,
  groupOperations,
  type LimiterOptionsOf,
  limiterMethods,
  normalizeLimiterOptions,
  peerHint,
  RATE_LIMIT_WORDING,
  routeOptionsOf,
} from '@tollgate/core/http';
import { nodePort } from '@tollgate/core/node';
import { describe, expect, it } from 'vitest';

type Req = { headers: Record<string, string>; socket: { remoteAddress: string } };
const from = (remoteAddress: string): Req => ({ headers: {}, socket: { remoteAddress } });
// A clock that stands still: the decisions of a test fall in one window wherever a minute ends.
const limiterOf = (rules: Rule<Req>[]) =>
  createRateLimit(
    nodePort as never,
    normalizeLimiterOptions<Req, LimiterOptionsOf<Req, never, never>>({ rules, clock: new ManualClock(0) }, RATE_LIMIT_WORDING),
  );
const ipLeft = (d: Decision | undefined) => d?.rules.find((r) => r.name === 'ip')?.remaining;

describe('limiterMethods', () => {
  it('reset takes a request (every app-level rule) or a rule and a key; peek consumes nothing (it reports what would be left after this request)', async () => {
    const core = limiterOf([{ name: 'ip', limit: 2, window: '1m' }]);
    const m = limiterMethods<Req>(core);
    const a = from('203.0.113.7');
    await core.limiter?.consume(a);
    await core.limiter?.consume(a);
    expect((await m.peek(a)).allowed).toBe(false);
    await m.reset(a);
    expect(ipLeft(await m.peek(a))).toBe(1);
    await core.limiter?.consume(a);
    const key = (await m.get('ip', '203.0.113.7')).remaining;
    expect(key).toBe(1);
    await m.reset('ip', '203.0.113.7');
    expect(ipLeft(await m.peek(a))).toBe(1);
    m.update('ip', { limit: 5 });
    expect(ipLeft(await m.peek(a))).toBe(4);
    await core.close();
  });
});

describe('groupOperations', () => {
  it('the first limiter makes the group, later ones join it; update reaches every limiter with the rule', async () => {
    const one = limiterOf([{ name: 'ip', limit: 2, window: '1m' }]);
    const two = limiterOf([
      { name: 'ip', limit: 3, window: '1m' },
      { name: 'login', limit: 1, window: '1m' },
    ]);
    const ops = groupOperations<Req>(undefined, one);
    expect(ops).toBeDefined();
    expect(groupOperations<Req>(ops, two)).toBeUndefined();
    // 'login' is only the second limiter's: found through the group.
    expect((await ops?.get('login', 'k'))?.remaining).toBe(1);
    ops?.update('ip', { limit: 10 });
    expect(ipLeft(await one.limiter?.peek(from('198.51.100.1')))).toBe(9);
    expect(ipLeft(await two.limiter?.peek(from('198.51.100.1')))).toBe(9);
    expect(() => ops?.update('nope', { limit: 1 })).toThrow(expect.objectContaining({ code: 'TG_UNKNOWN_RULE' }));
    // An invalid change is the caller's error, not an unknown rule.
    expect(() => ops?.update('ip', { limit: -1 })).toThrow(expect.objectContaining({ code: expect.not.stringMatching('UNKNOWN') }));
    await one.close();
    await two.close();
  });

  it('an object without a group gets a new one', () => {
    const one = limiterOf([{ name: 'ip', limit: 2, window: '1m' }]);
    expect(groupOperations<Req>({}, one)).toBeDefined();
  });
});

describe('choiceOption, own option checks, peer hints', () => {
  it('choiceOption: left out is the first; anything else not listed is a coded error naming the choices', () => {
    const hooks = ['onRequest', 'preParsing', 'preHandler'] as const;
    expect(choiceOption(undefined, hooks, 'x.hook', 'fix')).toBe('onRequest');
    expect(choiceOption('preHandler', hooks, 'x.hook', 'fix')).toBe('preHandler');
    expect(() => choiceOption('onSend', hooks, 'x.hook', 'fix')).toThrow(
      expect.objectContaining({
        code: 'TG_INVALID_OPTION',
        message: expect.stringContaining("'onRequest' (the default), 'preParsing', or 'preHandler'"),
      }),
    );
    expect(() => choiceOption('merge', ['add', 'replace'], 'route.mode', 'fix')).toThrow(/'add' \(the default\) or 'replace'/);
  });

  it("route options: the port's own checks run on what is given, and name the option", () => {
    const shape = {
      path: 'GET / config.rateLimit',
      own: { hook: (v: unknown, path: string) => choiceOption(v, ['onRequest', 'preHandler'], path, 'fix') },
      optionalRules: true,
      expected: 'an object',
      fix: 'fix',
    };
    expect(routeOptionsOf({}, shape)).toEqual({ rules: [], mode: 'add' });
    expect(routeOptionsOf({ hook: 'preHandler', mode: 'replace' }, shape)).toEqual({ rules: [], mode: 'replace', hook: 'preHandler' });
    expect(() => routeOptionsOf({ hook: 'onSend' }, shape)).toThrow(/GET \/ config\.rateLimit\.hook/);
    expect(() => routeOptionsOf({ hooks: 'onRequest' }, shape)).toThrow(expect.objectContaining({ code: 'TG_UNKNOWN_OPTION' }));
  });

  it("limiter options: an adapter's own check gets undefined for its default", () => {
    const o = normalizeLimiterOptions<Req, LimiterOptionsOf<Req, never, never> & { hook?: string }, { hook: string }>(
      { rules: [] },
      RATE_LIMIT_WORDING,
      {
        hook: (v) => (v === undefined ? 'onRequest' : String(v)),
      },
    );
    expect(o.hook).toBe('onRequest');
  });

  it('peerHint: a name the peer has gets what replaces it; other names (prototype keys too) none', () => {
    const hint = peerHint('@fastify/rate-limit', { max: "a rule's limit" });
    expect(hint('max')).toBe("That is an @fastify/rate-limit option; use a rule's limit (docs/migrating.md maps every option).");
    expect(hint('maximum')).toBeUndefined();
    expect(hint('constructor')).toBeUndefined();
  });
});
