/**
 * Fastify bindings of the controls (SPEC 8): per-route hooks, route opt-out, and more
 * than one control plugin per app. The control behaviour itself is covered by the
 * cross-adapter scenarios in test/controls.
 */

import { ManualTimers, TollgateError } from '@tollgate/core';
import { concurrency, concurrencyHook, ManualClock, shed, slowDown, slowDownHook } from '@tollgate/fastify';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { send, until } from '../../../test/controls/http.js';

const apps: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  while (apps.length > 0) await apps.pop()?.close();
});

async function listen(app: ReturnType<typeof Fastify>): Promise<number> {
  apps.push(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return (app.server.address() as { port: number }).port;
}

describe('Fastify control bindings', () => {
  it('a concurrency hook on one route limits that route only', async () => {
    const clock = new ManualClock(0);
    const timers = new ManualTimers(clock);
    const app = Fastify();
    const hook = concurrencyHook({ max: 1, timers });
    app.addHook('onClose', async () => hook.close());
    let started = 0;
    app.get('/export', { onRequest: hook }, () => {
      started++;
      return new Promise((resolve) => timers.setTimeout(() => resolve({ ok: true }), 1000));
    });
    app.get('/other', async () => ({ ok: true }));
    const port = await listen(app);
    const first = send(port, { path: '/export' });
    await until(() => started === 1, 'first export running');
    const second = await send(port, { path: '/export' }).reply;
    expect(second.status).toBe(429);
    expect(second.headers['ratelimit-policy']).toBe('"concurrency";q=1;qu="concurrent-requests"');
    expect((await send(port, { path: '/other' }).reply).headers['ratelimit-policy']).toBeUndefined();
    await timers.advance(1000);
    expect((await first.reply).status).toBe(200);
  });

  it('config.<control>: false opts a route out of a scope-wide plugin; two plugins of a kind stack', async () => {
    const app = Fastify();
    await app.register(shed, { maxInFlight: 1 });
    await app.register(concurrency, { max: 5, name: 'per-client' });
    await app.register(concurrency, { global: 10, name: 'all' });
    let release: () => void = () => {};
    let holding = 0;
    app.get('/hold', () => {
      holding++;
      return new Promise((resolve) => {
        release = () => resolve({ ok: true });
      });
    });
    app.get('/health', { config: { shed: false, concurrency: false } }, async () => ({ ok: true }));
    const port = await listen(app);
    const held = send(port, { path: '/hold' });
    await until(() => holding === 1, 'one request in flight');
    expect((await send(port, { path: '/hold' }).reply).status).toBe(503);
    const health = await send(port, { path: '/health' }).reply;
    expect(health.status).toBe(200);
    expect(health.headers['ratelimit-policy']).toBeUndefined();
    release();
    const r = await held.reply;
    expect(r.headers['ratelimit-policy']).toBe('"per-client";q=5;qu="concurrent-requests", "all-global";q=10;qu="concurrent-requests"');
  });

  it('a control plugin with bad options fails its registration with the coded error', async () => {
    const bad = [
      [slowDown, { window: '1m', delayAfter: 1, delay: 10, bogus: 1 }, 'TG_UNKNOWN_OPTION'],
      [concurrency, { max: 0 }, 'TG_INVALID_LIMIT'],
      [shed, { maxInFlight: -1 }, 'TG_INVALID_LIMIT'],
    ] as const;
    for (const [plugin, options, code] of bad) {
      // A short plugin timeout: a throw that escaped registration would show as a timeout (and an uncaught error).
      const app = Fastify({ pluginTimeout: 1000 });
      const err = await app.register(plugin as never, options as never).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TollgateError);
      expect((err as TollgateError).code).toBe(code);
    }
  });

  it('a slow-down hook delays its route and reports its figures', async () => {
    const clock = new ManualClock(0);
    const timers = new ManualTimers(clock);
    const app = Fastify();
    const hook = slowDownHook({ window: '1m', delayAfter: 1, delay: 3000, clock, timers, headers: 'draft-10' });
    app.addHook('onClose', async () => hook.close());
    const starts: number[] = [];
    app.post('/login', { onRequest: hook }, async () => {
      starts.push(clock.now());
      return { ok: true };
    });
    const port = await listen(app);
    expect((await send(port, { path: '/login', method: 'POST' }).reply).headers.ratelimit).toBe('"slow-down";r=1;t=60');
    const second = send(port, { path: '/login', method: 'POST' });
    await until(() => timers.pending === 1, 'second delayed');
    await timers.advance(3000);
    expect((await second.reply).status).toBe(200);
    expect(starts).toEqual([0, 3000]);
  });
});
