/**
 * A failing user callback goes to Hono's error handler (`app.onError`), never through,
 * and the middleware's own promise never rejects unhandled.
 */
import { ManualClock, rateLimit, slowDown } from '@tollgate/hono';
import { Hono, type MiddlewareHandler } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const unhandled: unknown[] = [];
const onUnhandled = (err: unknown) => unhandled.push(err);
beforeAll(() => process.on('unhandledRejection', onUnhandled));
afterAll(() => {
  process.off('unhandledRejection', onUnhandled);
  expect(unhandled).toEqual([]);
});

const connInfo = () => ({ remote: { address: '203.0.113.7' } });
const boom = () => {
  throw new Error('app bug');
};
const rejects = () => Promise.reject(new Error('app bug'));

const cases: Array<[string, () => MiddlewareHandler]> = [
  ['a throwing key', () => rateLimit({ rules: [{ name: 'k', limit: 1, window: '1m', key: boom }], connInfo })],
  ['a rejecting key', () => rateLimit({ rules: [{ name: 'k', limit: 1, window: '1m', key: rejects }], connInfo })],
  ['a rejecting skip', () => rateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m' }], skip: rejects, connInfo })],
  ['a throwing connInfo', () => rateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m' }], connInfo: boom })],
  ['a throwing deny list', () => rateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m' }], deny: boom, connInfo })],
  ['a throwing slowDown key', () => slowDown({ window: '1m', delayAfter: 1, delay: 10, key: boom })],
];

describe('failing callbacks', () => {
  for (const [what, make] of cases) {
    it(`${what} reaches app.onError`, async () => {
      const errors: unknown[] = [];
      const app = new Hono();
      app.onError((err, c) => {
        errors.push(err);
        return c.text('handled', 500);
      });
      app.use(make());
      app.get('/', (c) => c.text('reached'));
      const r = await app.request('/');
      expect(await r.text()).toBe('handled');
      expect(errors).toHaveLength(1);
    });
  }

  it('a handler that returns no Response is a coded error for app.onError', async () => {
    const errors: unknown[] = [];
    const app = new Hono();
    app.onError((err, c) => {
      errors.push(err);
      return c.text('handled', 500);
    });
    // A clock that stands still: the second request is refused (and reaches the handler) wherever a minute ends.
    const clock = new ManualClock(0);
    app.use(rateLimit({ rules: [{ name: 'ip', limit: 1, window: '1m' }], connInfo, clock, handler: (() => 'nope') as never }));
    app.get('/', (c) => c.text('reached'));
    expect(await (await app.request('/')).text()).toBe('reached');
    expect(await (await app.request('/')).text()).toBe('handled');
    expect(errors).toMatchObject([{ code: 'TG_INVALID_CALLBACK_RESULT' }]);
  });

  it('a connInfo that is not a function is a coded configuration error', () => {
    expect(() => rateLimit({ rules: [{ name: 'ip', rate: '1/s' }], connInfo: 'node' as never })).toThrow(
      expect.objectContaining({ code: 'TG_INVALID_OPTION', message: expect.stringContaining('rateLimit.connInfo') }),
    );
    expect(() => slowDown({ window: '1m', delayAfter: 1, delay: 10, connInfo: {} as never })).toThrow(
      expect.objectContaining({ code: 'TG_INVALID_OPTION', message: expect.stringContaining('slowDown.connInfo') }),
    );
  });
});
