/**
 * Parent side of the reliability suite's child processes: starts the app (app.ts), the
 * load generator (load.ts) and lease instances (lease-worker.ts) with the TypeScript
 * loader, collects what they report, and stops them. Every child is killed when the test
 * process exits, so a failed test leaves nothing running.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { AppConfig, AppMessage } from './app.js';
import type { LeaseWorkerCommand, LeaseWorkerConfig, LeaseWorkerReply, RunUntil } from './lease-worker.js';
import type { LoadCommand, LoadConfig, LoadResult } from './load.js';

const loader = fileURLToPath(new URL('./ts-loader.mjs', import.meta.url));
const appPath = fileURLToPath(new URL('./app.ts', import.meta.url));
const loadPath = fileURLToPath(new URL('./load.ts', import.meta.url));
const workerPath = fileURLToPath(new URL('./lease-worker.ts', import.meta.url));

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

function spawnChild(path: string, arg: unknown, execArgv: string[] = []): ChildProcess {
  const child = fork(path, [JSON.stringify(arg)], {
    execArgv: ['--import', loader, ...execArgv],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

export interface RunningApp {
  port: number;
  pid: number;
  /** Everything the app reported so far, in order. */
  messages: AppMessage[];
  breakerChanges(): string[];
  /**
   * Whether the breaker closed (from half-open, or straight from open when a call in
   * flight succeeded) at or after `at` (ms since the epoch; the child stamps each change).
   */
  closedSince(at: number): boolean;
  stats(): Promise<Extract<AppMessage, { type: 'stats' }>>;
  /** Asks the app to close; resolves with its exit code (0: nothing was left running). */
  stop(): Promise<number | null>;
  kill(): void;
}

// A cap for a hang only: starting a child with the TypeScript loader took over 30 s beside a CPU hog.
export function startApp(config: AppConfig, startTimeoutMs = 120_000): Promise<RunningApp> {
  const child = spawnChild(appPath, config);
  const messages: AppMessage[] = [];
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`app did not start within ${startTimeoutMs} ms`));
    }, startTimeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`app exited with ${code} before it was ready`));
    });
    child.on('message', (m: AppMessage) => {
      messages.push(m);
      if (m.type !== 'ready') return;
      clearTimeout(timer);
      resolve({
        port: m.port,
        pid: m.pid,
        messages,
        breakerChanges: () => messages.flatMap((x) => (x.type === 'breaker' ? [`${x.from}>${x.to}`] : [])),
        closedSince: (at) => messages.some((x) => x.type === 'breaker' && x.to === 'closed' && x.at >= at),
        stats: () =>
          new Promise((res) => {
            const on = (x: AppMessage) => {
              if (x.type !== 'stats') return;
              child.off('message', on);
              res(x);
            };
            child.on('message', on);
            child.send('stats');
          }),
        stop: async () => {
          if (child.exitCode !== null) return child.exitCode;
          child.send('stop');
          const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
          const code = await exited;
          clearTimeout(killer);
          return code;
        },
        kill: () => child.kill('SIGKILL'),
      });
    });
  });
}

/** Where the load was when a mark was fulfilled: answers recorded by then (results are in answer order), and the child's `Date.now()`. */
export interface MarkReached {
  index: number;
  at: number;
}

export interface RunningLoad {
  /** Resolves when the generator sends its first request. */
  started: Promise<void>;
  /** Resolves with every response once the generator has finished. */
  done: Promise<LoadResult>;
  /**
   * Resolves once `count` more requests have been answered (any status, a hung one when its
   * requestTimeoutMs is up), or with `clean` once `count` answers in a row were 200 and decided
   * by Redis; rejects if the load ends first (its durationMs or maxRequests cap).
   */
  answered(count: number, options?: { clean?: boolean }): Promise<MarkReached>;
  /** Ends the load after the requests in flight; resolves with every response, as `done`. */
  stop(): Promise<LoadResult>;
}

/** Starts the load generator; see load.ts. */
export function startLoad(config: LoadConfig): RunningLoad {
  const child = spawnChild(loadPath, config);
  let result: LoadResult | undefined;
  let onStart: () => void = () => {};
  const started = new Promise<void>((r) => {
    onStart = r;
  });
  let nextMark = 0;
  const marks = new Map<number, { resolve: (at: MarkReached) => void; reject: (e: Error) => void }>();
  child.on('message', (m: LoadResult | { type: 'started' } | ({ type: 'mark'; id: number } & MarkReached)) => {
    if (m.type === 'started') onStart();
    else if (m.type === 'mark') {
      marks.get(m.id)?.resolve({ index: m.index, at: m.at });
      marks.delete(m.id);
    } else result = m;
  });
  const done = new Promise<LoadResult>((resolve, reject) => {
    child.once('exit', (code) => {
      for (const mark of marks.values()) mark.reject(new Error(`the load ended (code ${code}) before the answers a test waited for`));
      marks.clear();
      if (result) resolve(result);
      else reject(new Error(`load generator exited with ${code} and no result`));
    });
  });
  const send = (command: LoadCommand) => {
    if (child.connected) child.send(command);
  };
  return {
    started,
    done,
    answered: (count, options) =>
      new Promise<MarkReached>((resolve, reject) => {
        if (!child.connected) {
          reject(new Error('the load has ended'));
          return;
        }
        const id = nextMark++;
        marks.set(id, { resolve, reject });
        send({ type: 'mark', id, count, clean: options?.clean === true });
      }),
    stop: () => {
      send({ type: 'stop' });
      return done;
    },
  };
}

/** Runs the load generator to its end and returns every response it recorded. */
export function runLoad(config: LoadConfig): Promise<LoadResult> {
  return startLoad(config).done;
}

/** The q-quantile (0..1) of `xs`, nearest rank. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] as number;
}

export interface LoadSummary {
  total: number;
  byStatus: Record<string, number>;
  p50: number;
  p99: number;
  max: number;
  /** The latest answer beyond a plain deadline timer in the app (app.ts LATE_HEADER); NaN when a response lacked it. */
  lateMax: number;
}

export function summarize(r: LoadResult, from = 0, to = Number.POSITIVE_INFINITY): LoadSummary {
  const idx = r.t.flatMap((t, i) => (t >= from && t < to ? [i] : []));
  const ms = idx.map((i) => r.ms[i] as number);
  const byStatus: Record<string, number> = {};
  for (const i of idx) byStatus[String(r.status[i])] = (byStatus[String(r.status[i])] ?? 0) + 1;
  const late = idx.map((i) => r.late[i] as number);
  return {
    total: idx.length,
    byStatus,
    p50: quantile(ms, 0.5),
    p99: quantile(ms, 0.99),
    max: Math.max(...ms),
    lateMax: late.some(Number.isNaN) ? Number.NaN : Math.max(0, ...late),
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `done()` every 20 ms until it holds or `capMs` has passed (a cap, for a test that would otherwise hang). */
export async function until(done: () => boolean, capMs: number): Promise<void> {
  const end = Date.now() + capMs;
  while (!done() && Date.now() < end) await sleep(20);
}

/** Runs a TypeScript child to its end and resolves with the last message it sent. */
export function runChild<T>(path: string, arg: unknown, execArgv: string[] = []): Promise<T> {
  const child = spawnChild(path, arg, execArgv);
  return new Promise((resolve, reject) => {
    let last: T | undefined;
    child.on('message', (m: T) => {
      last = m;
    });
    child.once('exit', (code) => (code === 0 && last !== undefined ? resolve(last) : reject(new Error(`${path} exited with ${code}`))));
  });
}

export interface LeaseWorker {
  pid: number;
  /** Makes requests one after another (see lease-worker.ts `RunUntil`); at most `n`. */
  run(rule: number, n: number, until?: RunUntil): Promise<LeaseWorkerReply>;
  /** Steps the worker's wall clock by `stepMs` (negative: back). */
  stepClock(stepMs: number): Promise<LeaseWorkerReply>;
  /** Closes its store (giving back what it holds); resolves with its exit code and its store errors. */
  close(): Promise<{ code: number | null; errors: LeaseWorkerReply['errors'] }>;
  kill(): void;
}

/** A command without its id (each member of the union): the parent numbers them. */
type Unnumbered<T> = T extends unknown ? Omit<T, 'id'> : never;

// A cap for a hang only (see startApp).
/** Starts one lease instance (lease-worker.ts) and resolves once its client is ready. */
export function startLeaseWorker(config: LeaseWorkerConfig, startTimeoutMs = 120_000): Promise<LeaseWorker> {
  const child = spawnChild(workerPath, config);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const waiting = new Map<number, { resolve: (r: LeaseWorkerReply) => void; reject: (e: Error) => void }>();
  let nextId = 0;
  child.once('exit', (code) => {
    for (const w of waiting.values()) w.reject(new Error(`lease worker exited with ${code} before answering`));
    waiting.clear();
  });
  const ask = (command: Unnumbered<LeaseWorkerCommand>) =>
    new Promise<LeaseWorkerReply>((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, { resolve, reject });
      child.send({ ...command, id } as LeaseWorkerCommand);
    });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`lease worker did not start within ${startTimeoutMs} ms`));
    }, startTimeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`lease worker exited with ${code} before it was ready`));
    });
    child.on('message', (m: LeaseWorkerReply | { type: 'ready' }) => {
      if (m.type === 'reply') {
        waiting.get(m.id)?.resolve(m);
        waiting.delete(m.id);
        return;
      }
      clearTimeout(timer);
      resolve({
        pid: child.pid as number,
        run: (rule, n, until = { kind: 'count' }) => ask({ type: 'run', rule, n, until }),
        stepClock: (stepMs) => ask({ type: 'clock', stepMs }),
        close: async () => {
          if (child.exitCode !== null) return { code: child.exitCode, errors: {} };
          const { errors } = await ask({ type: 'close' });
          const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
          const code = await exited;
          clearTimeout(killer);
          return { code, errors };
        },
        kill: () => child.kill('SIGKILL'),
      });
    });
  });
}
