// The polite-client example (examples/polite-client, through @tollgate/client) against a
// server whose only control is `slowDown` (issue 14: "a throttle that tells clients to
// stop"). A throttle delays and never refuses, so a RateLimit-aware client must never hold
// or retry because of it: by default slowDown sends no rate-limit headers, and with
// headers turned on it never announces r=0 for a request it only delays. The client runs
// as the README runs it (a child process on the built packages); the server is Express on
// loopback, in this process, and records what it sent. The example sends its batch at
// once, before any answer can hold it; the same client sending one request after another
// (each after the previous answer) shows that nothing the throttle announced holds it.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createFetch } from '@tollgate/client';
import { type HeadersOption, slowDown } from '@tollgate/express';
import express from 'express';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const built = existsSync(join(root, 'packages/client/dist/index.mjs'));
const BATCH = 12;
const DELAY_AFTER = 3;

interface Seen {
  delayed: number;
  rateLimit: string[];
}

async function server(headers: HeadersOption | undefined): Promise<{ url: string; seen: Seen; close(): Promise<void> }> {
  const seen: Seen = { delayed: 0, rateLimit: [] };
  const app = express();
  const throttle = slowDown({ window: '1m', delayAfter: DELAY_AFTER, delay: 25, ...(headers !== undefined ? { headers } : {}) });
  app.use(throttle);
  app.get('/', (req, res) => {
    if ((req.slowDown?.delayMs ?? 0) > 0) seen.delayed++;
    res.on('finish', () => {
      for (const name of ['ratelimit', 'ratelimit-remaining', 'x-ratelimit-remaining']) {
        const v = res.getHeader(name);
        if (v !== undefined) seen.rateLimit.push(`${name}: ${String(v)}`);
      }
    });
    res.json({ ok: true });
  });
  const s = http.createServer(app);
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(s.address() as { port: number }).port}`,
    seen,
    close: async () => {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
      await throttle.close();
    },
  };
}

function client(baseUrl: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['examples/polite-client/index.mjs'], {
      cwd: root,
      env: { ...process.env, BASE_URL: baseUrl, BATCH: String(BATCH) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
    });
    child.stderr.on('data', (c) => {
      out += c;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

describe('examples/polite-client against slowDown', () => {
  const modes: Array<HeadersOption | undefined> = [undefined, 'draft-10', 'draft-7', 'legacy'];
  for (const headers of modes) {
    it.skipIf(!built)(`never holds or retries because of the throttle (headers ${JSON.stringify(headers ?? 'off')})`, async () => {
      const s = await server(headers);
      try {
        const { code, out } = await client(s.url);
        expect(code, out).toBe(0);
        // The throttle was at work: every request past delayAfter was delayed...
        expect(s.seen.delayed).toBe(BATCH - DELAY_AFTER);
        // ...and the client neither held (r=0) nor retried: one attempt per request.
        expect(out).not.toMatch(/holding|retry #|gave up/);
        expect(out).toContain(
          `done: ${BATCH}/${BATCH} succeeded, ${BATCH} attempts sent, 0 refusals by the server (retried), 0 pacing waits, 0 refused and dropped`,
        );
        if (headers === undefined) expect(s.seen.rateLimit).toEqual([]);
        else {
          // Opted in: figures are sent on every response, and none of them says "nothing left".
          expect(s.seen.rateLimit).toHaveLength(BATCH);
          for (const h of s.seen.rateLimit) expect(h).not.toMatch(/r=0\b|remaining=0\b|remaining: 0$/);
        }
      } finally {
        await s.close();
      }
    });
  }

  for (const headers of modes) {
    it(`@tollgate/client, one request after another, is never held by the throttle's figures (headers ${JSON.stringify(headers ?? 'off')})`, async () => {
      const s = await server(headers);
      const waits: unknown[] = [];
      const stop = new AbortController();
      const polite = createFetch({
        maxWaitMs: 120_000,
        onWait: (e) => {
          waits.push(e);
          stop.abort(new Error(`held: ${JSON.stringify(e)}`));
        },
        onRetry: (e) => waits.push(e),
      });
      try {
        for (let i = 0; i < BATCH; i++) {
          const res = await polite(`${s.url}/?n=${i}`, { signal: stop.signal });
          expect(res.status).toBe(200);
          await res.arrayBuffer();
        }
        expect(waits).toEqual([]);
        expect(s.seen.delayed).toBe(BATCH - DELAY_AFTER);
      } finally {
        await s.close();
      }
    });
  }
});
