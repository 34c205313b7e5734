/**
 * A small load generator for the reliability suite, run as a child process so that the
 * app, the load and the test each have their own event loop. Closed loop: `workers`
 * concurrent senders, each sends a request, waits for its answer, pauses `pauseMs`, and
 * goes again, until the parent says stop, `durationMs` has passed or `maxRequests` have
 * been sent (the last two are safety caps for a test driven by counts). Every
 * response is recorded (send time from the start, status, latency); a request with no
 * answer within `requestTimeoutMs` is recorded as status 0 (a hung request), a socket
 * error as -1. `{ type: 'started' }` is sent when the load begins; the results go back
 * over IPC as one message at the end, then the child exits.
 *
 * Driven by counts (children.ts `answered`, `stop`): the parent sends `{ type: 'mark', id,
 * count }` and gets `{ type: 'mark', id, index, at }` back once `count` more requests have been
 * answered, whatever their status (with `clean: true`, once `count` answers in a row were
 * 200 and decided by Redis); `{ type: 'stop' }` ends the load after the requests in
 * flight. A test then says "100 answers after the fault" rather than "400 ms after the
 * fault", which a busy machine fills with fewer requests. `index` is how many answers were
 * recorded then (the results are in answer order) and `at` the child's `Date.now()`, so that a
 * test splits the results at the mark by count, not by the parent's clock, which hears of
 * the mark an IPC hop later.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';

export interface LoadConfig {
  ports: number[];
  path?: string;
  headers?: Record<string, string>;
  /** Rotates a header through `count` values (`<prefix><n>`), for traffic over many keys. */
  rotate?: { header: string; prefix: string; count: number };
  workers: number;
  pauseMs: number;
  durationMs: number;
  maxRequests: number;
  /** A request not answered by then is recorded as hung (status 0). */
  requestTimeoutMs: number;
}

export interface LoadResult {
  type: 'done';
  /** Send time of each request, ms from the start. */
  t: number[];
  status: number[];
  ms: number[];
  /** 1 where the response said the failure policy decided it (app.ts DEGRADED_HEADER). */
  degraded: number[];
  /** How late the app answered, beyond a plain deadline timer (app.ts LATE_HEADER); NaN without an answer. */
  late: number[];
}

const config = JSON.parse(process.argv[2] as string) as LoadConfig;
// The parent schedules its faults from this message, not from the spawn: starting a child
// can take seconds on a busy machine.
process.send?.({ type: 'started' });
const agent = new http.Agent({ keepAlive: true, maxSockets: config.workers });
const start = performance.now();
const result: LoadResult = { type: 'done', t: [], status: [], ms: [], degraded: [], late: [] };
let sent = 0;
let stopped = false;
/**
 * Marks waiting for answers: `count` more answers, or with `clean` `count` answers in a row
 * that were 200 and not decided by the failure policy (`run` counts them).
 */
const marks: { id: number; at: number; count: number; clean: boolean; run: number }[] = [];

export type LoadCommand = { type: 'stop' } | { type: 'mark'; id: number; count: number; clean?: boolean };

process.on('message', (m: LoadCommand) => {
  if (m.type === 'stop') stopped = true;
  else if (m.type === 'mark') {
    marks.push({ id: m.id, at: result.status.length + m.count, count: m.count, clean: m.clean === true, run: 0 });
    answered();
  }
});

/** Counts the latest answer into the clean marks; reports every mark that is fulfilled. */
function answered(clean?: boolean): void {
  for (let i = marks.length - 1; i >= 0; i--) {
    const mark = marks[i] as (typeof marks)[number];
    if (mark.clean) {
      if (clean !== undefined) mark.run = clean ? mark.run + 1 : 0;
      if (mark.run < mark.count) continue;
    } else if (result.status.length < mark.at) continue;
    marks.splice(i, 1);
    process.send?.({ type: 'mark', id: mark.id, index: result.status.length, at: Date.now() });
  }
}

function once(port: number): Promise<void> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    let done = false;
    const finish = (status: number, degraded = false, late = Number.NaN) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      result.t.push(Math.round(t0 - start));
      result.status.push(status);
      result.ms.push(performance.now() - t0);
      result.degraded.push(degraded ? 1 : 0);
      result.late.push(late);
      if (marks.length > 0) answered(status === 200 && !degraded);
      resolve();
    };
    const headers = { ...config.headers };
    if (config.rotate) headers[config.rotate.header] = `${config.rotate.prefix}${sent % config.rotate.count}`;
    const req = http.request({ host: '127.0.0.1', port, path: config.path ?? '/', agent, headers }, (res) => {
      res.resume();
      res.once('end', () =>
        finish(
          res.statusCode ?? -1,
          res.headers['x-tollgate-degraded'] !== undefined,
          Number(res.headers['x-tollgate-late'] ?? Number.NaN),
        ),
      );
      res.once('error', () => finish(-1));
    });
    const timer = setTimeout(() => {
      finish(0);
      req.destroy();
    }, config.requestTimeoutMs);
    req.once('error', () => finish(-1));
    req.end();
  });
}

async function worker(i: number): Promise<void> {
  while (!stopped && performance.now() - start < config.durationMs && sent < config.maxRequests) {
    const port = config.ports[(sent + i) % config.ports.length] as number;
    sent++;
    await once(port);
    if (config.pauseMs > 0) await new Promise((r) => setTimeout(r, config.pauseMs));
  }
}

await Promise.all(Array.from({ length: config.workers }, (_, i) => worker(i)));
agent.destroy();
process.send?.(result, () => process.disconnect());
