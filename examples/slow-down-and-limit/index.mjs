// A slow-down throttle and a rate limit on one Express app (docs/slow-down.md).
//
// Per client address: the first 3 requests in 10 s pass at once, then each is delayed one
// second more than the last (up to 5 s); behind the throttle, a limit of 10 in any minute.
// Run: node index.mjs          (serves on PORT, default 3000)
//      node index.mjs --demo   (starts, sends a burst of 8 requests, prints what happened, exits)

import { rateLimit, slowDown } from '@tollgate/express';
import express from 'express';

const app = express();

app.use(
  slowDown({
    window: '10s',
    delayAfter: 3,
    // default delay: (hits - delayAfter) * 1000
    maxDelay: '5s',
  }),
);
// The limiter counts when the throttle lets a request go (processing time). Put it before
// slowDown instead if it should judge arrivals; docs/slow-down.md shows the difference.
// sliding-log counts every admission of the last minute exactly, so `r` never depends on where a
// minute boundary falls (the default sliding-window counter estimates across clock-aligned windows).
app.use(rateLimit({ rules: [{ name: 'per-minute', rate: '10/min', algorithm: 'sliding-log' }] }));

app.get('/', (req, res) => {
  res.json({ hits: req.slowDown?.hits, delayedMs: req.slowDown?.delayMs });
});

const server = app.listen(Number(process.env.PORT ?? (process.argv.includes('--demo') ? 0 : 3000)), '127.0.0.1', async () => {
  const { port } = server.address();
  if (!process.argv.includes('--demo')) {
    console.log(`listening on http://127.0.0.1:${port}`);
    return;
  }
  const started = Date.now();
  const results = await Promise.all(
    Array.from({ length: 8 }, async (_, i) => {
      const res = await fetch(`http://127.0.0.1:${port}/`);
      return { i: i + 1, status: res.status, after: Date.now() - started, ratelimit: res.headers.get('ratelimit') };
    }),
  );
  for (const r of results.sort((a, b) => a.after - b.after)) {
    console.log(`#${r.i}\t${r.status}\tafter ${String(r.after).padStart(5)} ms\t${r.ratelimit}`);
  }
  server.close();
});
