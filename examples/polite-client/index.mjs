// A batch of requests through the polite client, against examples/express-stacked.
//
// Signed in as alice, whose `user` rule allows 30 requests per minute, a batch of 40
// sent at once would lose 10 to 429s with a plain fetch. The polite client honours
// Retry-After and the RateLimit headers, so all 40 finish: none is refused and dropped.
//
//   BASE_URL  the server (default http://localhost:$PORT, PORT default 3000)
//   BATCH     requests in the batch (default 40)
//   TOKEN     bearer token (default alice-token; empty for anonymous: 300/min per address)
//   PACE      optional self-pacing rate, e.g. 30/min: no request is even refused
//
// Run: see README.md.
import { createFetch } from '@tollgate/client';

const base = process.env.BASE_URL ?? `http://localhost:${process.env.PORT ?? 3000}`;
const batch = Number(process.env.BATCH ?? 40);
const token = process.env.TOKEN ?? 'alice-token';
const pace = process.env.PACE || undefined;

const started = Date.now();
const since = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s`;

// Count what the server really answered, below the retries.
let sent = 0;
let refusedByServer = 0;
let pacedWaits = 0;
async function countingFetch(input, init) {
  sent++;
  const res = await fetch(input, init);
  if (res.status === 429) refusedByServer++;
  return res;
}

const politeFetch = createFetch({
  fetch: countingFetch,
  // A per-minute limit can ask for a wait of up to a minute and a bit.
  maxWaitMs: 120_000,
  ...(pace && { pace }),
  onRetry: (e) => console.log(`${since()} retry #${e.retry} of ${e.url} in ${(e.waitMs / 1000).toFixed(1)} s (${e.status ?? e.reason})`),
  onWait: (e) => {
    // Pacing waits are many and short: counted, not printed.
    if (e.reason === 'pace') pacedWaits++;
    else console.log(`${since()} holding ${e.url}: the server reported r=0, waiting ${(e.waitMs / 1000).toFixed(1)} s`);
  },
  onGiveUp: (e) => console.log(`${since()} gave up on ${e.url} (${e.reason})`),
});

console.log(`${batch} requests to ${base}/ as ${token || 'anonymous'}${pace ? `, paced at ${pace}` : ''}`);
const headers = token ? { authorization: `Bearer ${token}` } : {};
const statuses = await Promise.all(
  Array.from({ length: batch }, async (_, i) => {
    try {
      const res = await politeFetch(`${base}/?n=${i}`, { headers });
      await res.arrayBuffer();
      return res.status;
    } catch (err) {
      console.error(`request ${i} failed: ${err.message}`);
      return 0;
    }
  }),
);

const ok = statuses.filter((s) => s >= 200 && s < 300).length;
const dropped = batch - ok;
console.log(
  `\n${since()} done: ${ok}/${batch} succeeded, ${sent} attempts sent, ${refusedByServer} refusals by the server (retried), ` +
    `${pacedWaits} pacing waits, ${dropped} refused and dropped`,
);
process.exitCode = dropped === 0 ? 0 : 1;
