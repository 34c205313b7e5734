// The tollgate playground: a small Express server protected by the real `rateLimit`
// middleware on the in-memory store, and a page where a user picks a rule and an arrival
// pattern, fires it, and sees what the server did next to the simulator's prediction.
//
// A run is one experiment: POST /api/runs reads the form into a rule and a pattern, gets
// the arrivals and the prediction, and creates a fresh limiter (its own MemoryStore) for
// the run, so runs never disturb each other. POST /api/runs/:run/fire then sends the
// pattern from the server itself, through a loopback client, to /api/hit/:run at the
// pattern's times (a browser would space the requests out: it opens at most six
// connections to a server), streams the progress, and ends with what the server saw,
// drawn with the CLI's own chart code, beside the simulator replayed on the times the
// limiter decided at. GET /api/live is the live view: refusals per policy over time, from
// @tollgate/otel's metrics.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { firstWindow, panelOf, simulate, summarize, timelineSvg } from '@tollgate/cli';
import { MemoryStore } from '@tollgate/core';
import { rateLimit } from '@tollgate/express';
import express from 'express';
import { firePattern } from './fire.mjs';
import { ALGORITHMS, arrivalsOf, FormError, MAX_REQUESTS, MAX_SPAN_MS, MODES, ruleOf } from './form.mjs';
import { createLive } from './live.mjs';

export { MAX_REQUESTS, MAX_SPAN_MS };

/** A request this much later than its pattern time is reported as late. */
const LATE_MS = 50;
/** Runs kept for their results; the oldest is dropped (and its store closed) beyond this. */
const MAX_RUNS = 16;
/** The name of every run's limiter: the live view shows its refusals. */
const LIMITER = 'playground';

const page = readFileSync(new URL('./page.html', import.meta.url), 'utf8');

function badRequest(res, err) {
  if (err instanceof FormError) {
    res.status(400).json({ error: { field: err.field, message: err.message } });
    return;
  }
  throw err;
}

function chart(title, policy, result, endMs = 0) {
  return timelineSvg([panelOf(policy, result)], { title, endMs });
}

/**
 * Creates the playground app. `now` is the time source in ms (tests script it).
 * @returns {{ app: import('express').Express, close: () => Promise<void> }}
 */
export function createPlayground({ now = () => performance.now() } = {}) {
  const app = express();
  const runs = new Map();
  const live = createLive(LIMITER, now);
  let nextId = 1;

  app.get('/', (_req, res) => {
    res.type('html').set('Cache-Control', 'no-store').send(page);
  });
  app.get('/api/algorithms', (_req, res) => {
    res.json({ algorithms: ALGORITHMS, modes: MODES });
  });

  // The loopback client opens its connections with this before a run.
  app.get('/api/ping', (_req, res) => {
    res.set('Cache-Control', 'no-store').json({ ok: true });
  });

  app.post('/api/runs', express.json({ limit: '16kb' }), async (req, res) => {
    let rule;
    let policy;
    let arrivals;
    try {
      ({ rule, policy } = ruleOf(req.body));
      arrivals = arrivalsOf(req.body?.pattern, firstWindow(policy));
    } catch (err) {
      badRequest(res, err);
      return;
    }
    const prediction = await simulate(policy, arrivals);
    // Each run's store counts time from the run's start (when it fires), so clock-aligned
    // windows (fixed window, sliding window counter) start where the simulator's do: at the
    // pattern's 0.
    const origin = { t0: now() };
    const clock = { now: () => Math.floor(now() - origin.t0) };
    const store = new MemoryStore({ clock });
    // The same rules the simulator ran, with the key and cost read from the request's arrival.
    const rules = policy.rules.map((r) => ({ ...r, key: (req) => req.arrival.key, cost: (req) => req.arrival.cost }));
    const id = String(nextId++);
    const run = {
      id,
      policy,
      arrivals,
      prediction,
      store,
      clock,
      origin,
      started: false,
      firing: false,
      limiter: rateLimit({ rules, store, name: LIMITER }),
      seen: new Map(),
    };
    runs.set(id, run);
    if (runs.size > MAX_RUNS) {
      const [oldest] = runs.values();
      runs.delete(oldest.id);
      await oldest.store.close();
    }
    res.json({
      id,
      rule,
      description: prediction.policy,
      arrivals,
      prediction: { summary: prediction.summary, svg: chart('Simulator prediction', policy, prediction) },
    });
  });

  /** The run's clock starts now (once, before any request). False when it had started. */
  function start(run) {
    if (run.started || run.seen.size > 0) return false;
    run.started = true;
    run.origin.t0 = now();
    return true;
  }

  // For clients that send the pattern themselves: the run's clock starts now.
  app.post('/api/runs/:id/start', (req, res) => {
    const run = runs.get(req.params.id);
    if (!run || !start(run)) {
      res.status(409).json({ error: { message: 'This run is unknown or has already been fired: start a new one.' } });
      return;
    }
    res.json({ ok: true });
  });

  // Fires the run's pattern from here, through a loopback client to this server's own
  // address, and streams one JSON line per answer, then the result.
  app.post('/api/runs/:id/fire', async (req, res) => {
    const run = runs.get(req.params.id);
    if (!run || run.firing || run.started) {
      res.status(409).json({ error: { message: 'This run is unknown or has already been fired: start a new one.' } });
      return;
    }
    run.firing = true;
    res.status(200).type('application/x-ndjson').set('Cache-Control', 'no-store');
    res.flushHeaders();
    const n = run.arrivals.length;
    let done = 0;
    let lastWrite = 0;
    // The live view first (the first run loads the metrics SDK), then the run's clock.
    await live.begin();
    try {
      await firePattern({
        host: req.socket.localAddress,
        port: req.socket.localPort,
        arrivals: run.arrivals,
        warmPath: '/api/ping',
        started: () => start(run),
        path: (i) => `/api/hit/${run.id}?i=${i}`,
        answered() {
          done++;
          // At most one progress line per 50 ms, and the last one.
          const t = now();
          if (done === n || t - lastWrite >= 50) {
            lastWrite = t;
            res.write(`${JSON.stringify({ answered: done, of: n })}\n`);
          }
        },
      });
    } finally {
      await live.end();
    }
    res.end(`${JSON.stringify({ result: await resultOf(run) })}\n`);
  });

  // Records each request of a run as it arrives and when it finishes, around the limiter.
  function record(req, res, next) {
    const run = runs.get(req.params.id);
    const i = Number(req.query.i);
    const arrival = run?.arrivals[i];
    if (!run?.started || !Number.isInteger(i) || !arrival || run.seen.has(i)) {
      res.status(404).json({ error: { message: 'unknown run or request' } });
      return;
    }
    req.arrival = arrival;
    const seen = { i, seq: run.seen.size, arrivedAt: null, handledAt: null, delayMs: 0, status: 0, rules: [] };
    run.seen.set(i, seen);
    res.on('finish', () => {
      seen.status = res.statusCode;
      // The middleware leaves its decision on the request, refusals included. Its time is
      // the instant the limiter decided at, on the store's clock: the arrival as the limiter
      // saw it. (A clock read of our own, even a moment before, can fall in the previous
      // millisecond and put an admission one window after another inside the same window.)
      const d = req.rateLimit;
      if (d) {
        seen.arrivedAt = d.at;
        seen.rules = d.allowed ? d.rules.filter((r) => r.delayMs > 0).map((r) => r.name) : d.rejectedBy;
      }
    });
    req.run = run;
    req.seen = seen;
    next();
  }

  app.post(
    '/api/hit/:id',
    record,
    (req, res, next) => req.run.limiter(req, res, next),
    function handler(req, res) {
      req.seen.handledAt = req.run.clock.now();
      req.seen.delayMs = req.rateLimit?.delayMs ?? 0;
      res.json({ ok: true, delayMs: req.seen.delayMs });
    },
  );

  /** What the server saw, charted, and the simulator replayed on the times the limiter decided at. */
  async function resultOf(run) {
    const seen = [...run.seen.values()].filter((s) => s.status !== 0 && s.arrivedAt !== null).sort((a, b) => a.i - b.i);
    // Times are the run's clock: what the limiter itself read.
    const records = seen.map((s) => {
      const a = run.arrivals[s.i];
      const admitted = s.status < 400 && s.handledAt !== null;
      const delayed = admitted && s.delayMs > 0;
      // A delayed request's departure is when its handler actually ran.
      const departure = !admitted ? null : delayed ? Math.max(s.arrivedAt, s.handledAt) : s.arrivedAt;
      return {
        i: s.i,
        arrival: s.arrivedAt,
        key: a.key,
        cost: a.cost,
        decision: !admitted ? 'rejected' : delayed ? 'delayed' : 'admitted',
        delayMs: delayed ? departure - s.arrivedAt : 0,
        departure,
        rules: s.rules,
        retryAfterMs: 0,
        status: s.status,
        seq: s.seq,
      };
    });
    const summary = summarize(records, firstWindow(run.policy).windowMs);
    const observed = { policy: run.policy.name, records, summary };
    // The simulator on the times the limiter decided at: it should agree with the server.
    const byArrival = [...records].sort((a, b) => a.arrival - b.arrival || a.seq - b.seq);
    const replay = await simulate(
      run.policy,
      byArrival.map((r) => ({ t: r.arrival, key: r.key, cost: r.cost })),
    );
    const agree = byArrival.filter((r, k) => (r.decision === 'rejected') === (replay.records[k]?.decision === 'rejected')).length;
    // Requests that reached the limiter well after their time in the pattern (timers ran late).
    const late = seen.filter((s) => s.arrivedAt - run.arrivals[s.i].t > LATE_MS).length;
    const endMs = Math.max(summary.endMs, run.prediction.summary.endMs);
    return {
      sent: run.arrivals.length,
      late,
      received: seen.length,
      // Both charts again on one time axis, so they can be compared at a glance.
      observed: { summary, records, svg: chart('What the server did', run.policy, observed, endMs) },
      prediction: { summary: run.prediction.summary, svg: chart('Simulator prediction', run.policy, run.prediction, endMs) },
      replay: { summary: replay.summary, agree, of: records.length },
    };
  }

  app.get('/api/runs/:id/result', async (req, res) => {
    const run = runs.get(req.params.id);
    if (!run) {
      res.status(404).json({ error: { message: 'unknown run' } });
      return;
    }
    res.json(await resultOf(run));
  });

  app.get('/api/live', (_req, res) => {
    res.set('Cache-Control', 'no-store').json(live.view());
  });

  return {
    app,
    async close() {
      await live.close();
      for (const run of runs.values()) await run.store.close();
      runs.clear();
    },
  };
}

/**
 * Starts the playground on `host:port`; `now` as for createPlayground.
 * @returns {Promise<{ url: string, close: () => Promise<void> }>}
 */
export async function startPlayground({ port = 4000, host = '127.0.0.1', now } = {}) {
  const { app, close } = createPlayground(now ? { now } : {});
  const server = await new Promise((resolve, reject) => {
    const s = app.listen(port, host, (err) => (err ? reject(err) : resolve(s)));
    s.once('error', reject);
  });
  const address = server.address();
  const url = `http://${host}:${address.port}/`;
  return {
    url,
    async close() {
      await close();
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
