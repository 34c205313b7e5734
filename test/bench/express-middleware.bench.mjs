// The cost of the rate-limit middleware itself, without HTTP: each middleware is called
// with a minimal request and response and the time until it calls next() is measured,
// for tollgate's rateLimit (one rule) and express-rate-limit (one limit, draft-8 and
// draft-7 headers, validations off), beside a middleware that only calls next(). One process, rounds
// interleaved, median of 9 rounds of 100 000 calls after warm-up. Complements
// express.bench.mjs, whose HTTP figures are dominated by Node's HTTP stack and by
// whatever else runs on the machine (docs/benchmarks-history.md, "Express").
//
//   pnpm build && node test/bench/express-middleware.bench.mjs
//   TOLLGATE_EXPRESS=/path/to/dist/index.mjs node test/bench/express-middleware.bench.mjs
import { pathToFileURL } from 'node:url';

const ALLOW = 1_000_000_000;
const CALLS = 100_000;
const ROUNDS = 9;

async function loadTollgate() {
  if (process.env.TOLLGATE_EXPRESS) return import(pathToFileURL(process.env.TOLLGATE_EXPRESS).href);
  try {
    return await import('@tollgate/express');
  } catch {
    return import(new URL('../../packages/express/dist/index.mjs', import.meta.url).href);
  }
}

const { rateLimit } = await loadTollgate();
const erl = (await import('express-rate-limit')).rateLimit;

const variants = {
  tollgate: rateLimit({ rules: [{ name: 'ip', limit: ALLOW, window: '1m' }] }),
  'express-rate-limit (draft-8)': erl({
    windowMs: 60_000,
    limit: ALLOW,
    standardHeaders: 'draft-8',
    legacyHeaders: false,
    validate: false,
  }),
  // draft-8 adds a hashed partition key to every response; draft-7 does not.
  'express-rate-limit (draft-7)': erl({
    windowMs: 60_000,
    limit: ALLOW,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    validate: false,
  }),
  'next() only': (_req, _res, next) => next(),
};

// What both middlewares read and write; express-rate-limit keys on req.ip.
function request() {
  return { headers: {}, socket: { remoteAddress: '127.0.0.1' }, ip: '127.0.0.1', app: { get: () => false } };
}
function response() {
  const h = {};
  return {
    statusCode: 200,
    headersSent: false,
    getHeader: (n) => h[n.toLowerCase()],
    setHeader: (n, v) => {
      h[n.toLowerCase()] = v;
    },
    once() {},
    on() {},
  };
}

const call = (mw) => new Promise((resolve) => mw(request(), response(), resolve));

async function perCall(mw) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < CALLS; i++) await call(mw);
  return Number(process.hrtime.bigint() - t0) / CALLS / 1000;
}

for (const mw of Object.values(variants)) for (let i = 0; i < 3; i++) await perCall(mw);
const samples = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (let r = 0; r < ROUNDS; r++) for (const [name, mw] of Object.entries(variants)) samples[name].push(await perCall(mw));

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`Node ${process.version}, ${CALLS} calls x ${ROUNDS} rounds (median, min–max)\n`);
console.log('| middleware | µs per request |');
console.log('| --- | ---: |');
for (const [name, xs] of Object.entries(samples)) {
  console.log(`| ${name} | ${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}) |`);
}
