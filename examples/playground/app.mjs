// The tollgate playground (SPEC 11): a small Express server protected by the real
// `rateLimit` middleware on the in-memory store, and a page that fires an arrival
// pattern at it and draws what happened next to the simulator's prediction.
//
// A run is one experiment: POST /api/runs picks the policy and the pattern, gets the
// arrivals and the prediction, and creates a fresh limiter (its own MemoryStore) for
// the run, so runs never disturb each other. The page then sends each request to
// /api/hit/:run at its time; GET /api/runs/:run/result returns what the server saw,
// drawn with the CLI's own chart code, and the simulator replayed on the times the
// requests actually arrived (which should agree decision for decision).
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import {
  ALGORITHM_CHOICES,
  CliError,
  firstWindow,
  generateArrivals,
  panelOf,
  parsePattern,
  policyFromFlags,
  simulate,
  summarize,
  timelineSvg,
} from '@tollgate/cli';
import { MemoryStore, TollgateError } from '@tollgate/core';
import { rateLimit } from '@tollgate/express';
import express from 'express';

/** A browser keeps a run short: at most this many requests within this many ms. */
export const MAX_REQUESTS = 400;
export const MAX_SPAN_MS = 30_000;
/** A request this much later than its pattern time is reported as late. */
const LATE_MS = 50;
/** Runs kept for their results; the oldest is dropped (and its store closed) beyond this. */
const MAX_RUNS = 16;

const page = readFileSync(new URL('./page.html', import.meta.url), 'utf8');

function badRequest(res, err) {
  if (err instanceof CliError || err instanceof TollgateError) {
    res.status(400).json({ error: { code: err.code, message: err.message } });
    return;
  }
  throw err;
}

/** Builds the policy of a run from the page's form (the CLI's flags, as strings). */
function policyOf(body) {
  const { algorithm = 'sliding-window', rate = '10/s', burst, queue } = body ?? {};
  const flags = { rate: String(rate) };
  if (burst !== undefined && burst !== '') flags.burst = String(burst);
  if (queue !== undefined && queue !== '') flags.queue = String(queue);
  return policyFromFlags(String(algorithm), flags, true);
}

/** The arrivals of a run, bounded so that a page can send them. */
function arrivalsOf(policy, pattern) {
  const arrivals = generateArrivals([parsePattern(String(pattern ?? ''))], firstWindow(policy));
  const last = arrivals[arrivals.length - 1];
  if (arrivals.length > MAX_REQUESTS || (last && last.t > MAX_SPAN_MS)) {
    throw new CliError('TG_CLI_INVALID_PATTERN', {
      path: `pattern ${JSON.stringify(pattern)}`,
      expected: `at most ${MAX_REQUESTS} requests within ${MAX_SPAN_MS / 1000} s for the playground`,
      received: `${arrivals.length} requests over ${((last?.t ?? 0) / 1000).toFixed(1)} s`,
      fix: 'Use a smaller pattern here, or the tollgate CLI for big ones.',
    });
  }
  return arrivals;
}

function chart(title, policy, result, endMs = 0) {
  return timelineSvg([panelOf(policy, result)], { title, endMs });
}

/**
 * Creates the playground app.
 * @returns {{ app: import('express').Express, close: () => Promise<void> }}
 */
export function createPlayground() {
  const app = express();
  const runs = new Map();
  let nextId = 1;

  app.get('/', (_req, res) => {
    res.type('html').set('Cache-Control', 'no-store').send(page);
  });
  app.get('/api/algorithms', (_req, res) => {
    res.json(ALGORITHM_CHOICES.filter((a) => a !== 'leaky-bucket'));
  });
  // Lets the page open its connections before a run, so a burst is not spread by TCP handshakes.
  app.get('/api/ping', (_req, res) => {
    res.set('Cache-Control', 'no-store').json({ ok: true });
  });

  app.post('/api/runs', express.json({ limit: '16kb' }), async (req, res) => {
    let policy;
    let arrivals;
    try {
      policy = policyOf(req.body);
      arrivals = arrivalsOf(policy, req.body?.pattern);
    } catch (err) {
      badRequest(res, err);
      return;
    }
    const prediction = await simulate(policy, arrivals);
    // Each run's store counts time from the run's start (POST /api/runs/:id/start, sent by
    // the page just before its first request), so clock-aligned windows (fixed window,
    // sliding window counter) start where the simulator's do: at the pattern's 0.
    const origin = { t0: performance.now() };
    const clock = { now: () => Math.floor(performance.now() - origin.t0) };
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
      limiter: rateLimit({ rules, store }),
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
      description: prediction.policy,
      arrivals,
      prediction: { summary: prediction.summary, records: prediction.records, svg: chart('Simulator prediction', policy, prediction) },
    });
  });

  // The page is about to send the first request: the run's clock starts now (once, before any request).
  app.post('/api/runs/:id/start', (req, res) => {
    const run = runs.get(req.params.id);
    if (!run || run.started || run.seen.size > 0) {
      res.status(409).json({ error: { message: 'unknown or already started run' } });
      return;
    }
    run.started = true;
    run.origin.t0 = performance.now();
    res.json({ ok: true });
  });

  // Records each request of a run as it arrives and when it finishes, around the limiter.
  function record(req, res, next) {
    const run = runs.get(req.params.id);
    const i = Number(req.query.i);
    const arrival = run?.arrivals[i];
    if (!run || !Number.isInteger(i) || !arrival || run.seen.has(i)) {
      res.status(404).json({ error: { message: 'unknown run or request' } });
      return;
    }
    req.arrival = arrival;
    const seen = { i, seq: run.seen.size, arrivedAt: run.clock.now(), handledAt: null, delayMs: 0, status: 0, rules: [] };
    run.seen.set(i, seen);
    res.on('finish', () => {
      seen.status = res.statusCode;
      // The middleware leaves its decision on the request, refusals included (SPEC 9).
      const d = req.rateLimit;
      if (d) seen.rules = d.allowed ? d.rules.filter((r) => r.delayMs > 0).map((r) => r.name) : d.rejectedBy;
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

  app.get('/api/runs/:id/result', async (req, res) => {
    const run = runs.get(req.params.id);
    if (!run) {
      res.status(404).json({ error: { message: 'unknown run' } });
      return;
    }
    const seen = [...run.seen.values()].filter((s) => s.status !== 0).sort((a, b) => a.i - b.i);
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
    // The simulator on the arrival times the server actually saw: it should agree with the server.
    // Requests can reach the server out of pattern order (browser connections): replay them in the order it saw them.
    const byArrival = [...records].sort((a, b) => a.seq - b.seq);
    const replay = await simulate(
      run.policy,
      byArrival.map((r) => ({ t: r.arrival, key: r.key, cost: r.cost })),
    );
    const agree = byArrival.filter((r, k) => (r.decision === 'rejected') === (replay.records[k]?.decision === 'rejected')).length;
    // Requests that reached the server well after their time in the pattern: the browser held
    // them (at most six connections per server) or timers ran late.
    const late = seen.filter((s) => s.arrivedAt - run.arrivals[s.i].t > LATE_MS).length;
    res.json({
      sent: run.arrivals.length,
      late,
      received: seen.length,
      // Both charts again on one time axis, so they can be compared at a glance.
      observed: {
        summary,
        records,
        svg: chart('What the server did', run.policy, observed, Math.max(summary.endMs, run.prediction.summary.endMs)),
      },
      prediction: { svg: chart('Simulator prediction', run.policy, run.prediction, Math.max(summary.endMs, run.prediction.summary.endMs)) },
      replay: { summary: replay.summary, agree, of: records.length },
    });
  });

  return {
    app,
    async close() {
      for (const run of runs.values()) await run.store.close();
      runs.clear();
    },
  };
}

/**
 * Starts the playground on `host:port`.
 * @returns {Promise<{ url: string, close: () => Promise<void> }>}
 */
export async function startPlayground({ port = 4000, host = '127.0.0.1' } = {}) {
  const { app, close } = createPlayground();
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
