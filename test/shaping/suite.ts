/**
 * The shaping scenarios: one suite every port runs unchanged, with `limitRate` on real
 * loopback sockets and clients reading as fast as they can, in real time (a few hundred
 * KB and at most a couple of seconds each). The bound `burst + rate·T` over every window
 * is checked on arrival times, granting 100 ms of receive latency; durations are checked
 * from below only (pacing is what makes them long), so a busy machine cannot fail them.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { until } from '../controls/http.js';
import type { MakeShapingApp, ShapingApp, ShapingOptions } from './apps.js';
import { download, merged, worstExcess } from './client.js';

const RATE = 400_000;
const BURST = 100_000;
const SLACK_MS = 100;
const BASE: ShapingOptions = { rate: '400KB/s', burst: '100KB' };

/** The least time, in ms, `bytes` can take under the bound (what exceeds burst and after, at rate). */
const leastMs = (bytes: number, after = 0) => ((bytes - BURST - after) / RATE) * 1000;

export function shapingScenarios(label: string, make: MakeShapingApp): void {
  describe(`limitRate shaping: ${label}`, () => {
    let app: ShapingApp | undefined;
    const start = async (options: ShapingOptions = BASE) => {
      app = await make(options);
      return app;
    };
    afterEach(async () => {
      await app?.close();
      app = undefined;
    });

    it('paces one huge buffer to burst + rate·T and says its Content-Length', async () => {
      const a = await start();
      const d = await download(a.port, '/buf?n=400000');
      expect(d.status).toBe(200);
      expect(Number(d.headers['content-length'])).toBe(400_000);
      expect(d.headers['transfer-encoding']).toBeUndefined();
      expect(d.bytes).toBe(400_000);
      expect(worstExcess(d.samples, BURST, RATE, SLACK_MS)).toBeLessThanOrEqual(0);
      expect(d.ms).toBeGreaterThanOrEqual(leastMs(400_000) * 0.98);
      expect(d.headers.ratelimit).toBeUndefined();
      expect(d.headers['ratelimit-policy']).toBeUndefined();
    });

    it('paces a piped stream, and the source is read no faster than the body leaves', async () => {
      const a = await start();
      const d = await download(a.port, '/stream?n=400000', { headers: { 'x-id': 's' } });
      expect(d.bytes).toBe(400_000);
      expect(worstExcess(d.samples, BURST, RATE, SLACK_MS)).toBeLessThanOrEqual(0);
      expect(d.ms).toBeGreaterThanOrEqual(leastMs(400_000) * 0.98);
      expect(a.produced.get('s')).toBe(400_000);
    });

    it('shares one bucket among the concurrent responses of a key (six connections get rate in total)', async () => {
      const a = await start();
      const t0 = performance.now();
      const ds = await Promise.all(
        Array.from({ length: 6 }, (_, i) => download(a.port, i % 2 ? '/buf?n=70000' : `/stream?n=70000`, { t0 })),
      );
      for (const d of ds) expect(d.bytes).toBe(70_000);
      expect(worstExcess(merged(ds), BURST, RATE, SLACK_MS)).toBeLessThanOrEqual(0);
      expect(Math.max(...ds.map((d) => d.ms))).toBeGreaterThanOrEqual(leastMs(420_000) * 0.98);
      await until(() => a.limit().active.responses === 0, 'every response closed');
      expect(a.limit().active.keys).toBe(0);
    });

    it('keeps keys apart: two clients with their own keys each get the full rate', async () => {
      const a = await start({ ...BASE, key: (req: { headers: Record<string, unknown> }) => String(req.headers['x-key']) });
      const t0 = performance.now();
      const ds = await Promise.all(['a', 'b'].map((k) => download(a.port, '/buf?n=300000', { t0, headers: { 'x-key': k } })));
      for (const d of ds) {
        expect(d.bytes).toBe(300_000);
        expect(worstExcess(d.samples, BURST, RATE, SLACK_MS)).toBeLessThanOrEqual(0);
        expect(d.ms).toBeGreaterThanOrEqual(leastMs(300_000) * 0.98);
      }
      // One shared bucket would need (600 KB - burst) / rate = 1250 ms at least.
      expect(Math.max(...ds.map((d) => d.ms))).toBeLessThan(1250);
    });

    it('sends `after` bytes of each response unpaced, then paces', async () => {
      const a = await start({ ...BASE, after: '150KB' });
      const d = await download(a.port, '/buf?n=400000');
      expect(d.bytes).toBe(400_000);
      expect(worstExcess(d.samples, BURST + 150_000, RATE, SLACK_MS)).toBeLessThanOrEqual(0);
      expect(d.ms).toBeGreaterThanOrEqual(leastMs(400_000, 150_000) * 0.98);
      // Counted from the first byte, the whole body would need 750 ms.
      expect(d.ms).toBeLessThan(leastMs(400_000));
    });

    it('sends the bucket as RateLimit fields only when headers is set, never announcing r=0', async () => {
      const a = await start({ ...BASE, headers: 'draft-10' });
      const first = await download(a.port, '/buf?n=150000');
      expect(first.headers['ratelimit-policy']).toMatch(/^"limit-rate";q=400000;w=1/);
      // Read before the body was taken: the full bucket.
      expect(first.headers.ratelimit).toMatch(/^"limit-rate";r=100000;t=\d+/);
      const second = await download(a.port, '/buf?n=1000');
      const r = Number(/r=(\d+)/.exec(String(second.headers.ratelimit))?.[1]);
      expect(r).toBeGreaterThanOrEqual(1);
      expect(r).toBeLessThan(100_000);
    });

    it("hands a key function's throw to the framework's error handler (500), and lets an absent key through unpaced", async () => {
      const a = await start({
        ...BASE,
        key: (req: { headers: Record<string, unknown> }) => {
          if (req.headers['x-key'] === 'boom') throw new Error('boom');
          return req.headers['x-key'] as string | undefined;
        },
      });
      const boom = await download(a.port, '/buf?n=10', { headers: { 'x-key': 'boom' } });
      expect(boom.status).toBe(500);
      const t0 = performance.now();
      const free = await download(a.port, '/buf?n=400000');
      expect(free.bytes).toBe(400_000);
      // Paced it would need 750 ms at least.
      expect(performance.now() - t0).toBeLessThan(700);
    });

    it('does not pace a HEAD request', async () => {
      const a = await start({ rate: '1KB/s', burst: '1KB' });
      const d = await download(a.port, '/buf?n=400000', { method: 'HEAD' });
      expect(d.status).toBe(200);
      expect(d.bytes).toBe(0);
      expect(d.ms).toBeLessThan(2000);
    });

    it('stops pacing when the client leaves: the source is destroyed and the key freed', async () => {
      const a = await start();
      const d = await download(a.port, '/stream?n=-1', { headers: { 'x-id': 'gone' }, leaveAfter: 150_000 });
      expect(d.bytes).toBeGreaterThanOrEqual(150_000);
      await until(() => a.destroyed.has('gone'), 'the source destroyed');
      await until(() => a.limit().active.responses === 0 && a.limit().active.keys === 0, 'the key freed');
      const produced = a.produced.get('gone') ?? 0;
      await new Promise((r) => setTimeout(r, 100));
      expect(a.produced.get('gone')).toBe(produced);
      // The key goes on at its rate for the next response.
      const next = await download(a.port, '/buf?n=100000');
      expect(next.bytes).toBe(100_000);
    });

    it('a client that never reads holds the source still and does not starve its key', async () => {
      const a = await start({ rate: '20MB/s', burst: '1MB' });
      const socket = net.connect(a.port, '127.0.0.1');
      socket.pause();
      socket.write('GET /stream?n=-1 HTTP/1.1\r\nHost: x\r\nX-Id: still\r\n\r\n');
      // Once the socket's buffers are full the pacer asks for no more bytes and the source stops.
      let last = -1;
      await until(
        async () => {
          const now = a.produced.get('still') ?? 0;
          const stable = now > 0 && now === last;
          last = now;
          if (!stable) await new Promise((r) => setTimeout(r, 150));
          return stable;
        },
        'the source to stop',
        8000,
      );
      // Far below what 20 MB/s for that long would have read: what the kernel buffers took, plus a chunk.
      expect(last).toBeLessThan(64 * 1024 * 1024);
      const other = await download(a.port, '/buf?n=2000000');
      expect(other.bytes).toBe(2_000_000);
      socket.destroy();
      await until(() => a.destroyed.has('still'), 'the source destroyed');
      await until(() => a.limit().active.responses === 0, 'the key freed');
    });
  });
}
