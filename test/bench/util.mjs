// Shared helpers for the on-demand benchmarks: a private redis-server on a free port,
// medians and spreads.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Starts `redis-server` on a free loopback port; resolves once it answers PING. */
export async function startRedis() {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-redis-'));
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
    stdio: 'ignore',
  });
  const { Redis } = await import('ioredis');
  const probe = new Redis({ port, lazyConnect: true, retryStrategy: () => 50, maxRetriesPerRequest: 0 });
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await probe.connect();
      await probe.ping();
      break;
    } catch {
      if (Date.now() > deadline) throw new Error('redis-server did not start within 10 s');
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    port,
    flush: () => probe.flushall(),
    async stop() {
      probe.disconnect();
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Spread as ± half the range, relative to the median. */
export function spread(xs) {
  const m = median(xs);
  return m === 0 ? 0 : (Math.max(...xs) - Math.min(...xs)) / 2 / m;
}
