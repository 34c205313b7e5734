/**
 * The concurrency limit, framework-agnostic.
 *
 * At most `max` requests in flight per key and/or `global` in total, each holding a
 * slot in a `SlotStore` from admission until its response is over (concurrency-slots.ts).
 * A refused request may wait in a bounded FIFO queue (`queue`, `queueTimeout`) for a slot
 * to free up (concurrency-queue.ts). A per-key refusal is the client's doing (429); a
 * global one is the server's (503).
 *
 * Slots are released exactly once (`release` is idempotent; adapters call it from
 * `onceDone`).
 */
import { randomUUID } from 'node:crypto';
import { callbackResultError, markAppError, skipOf } from '../app-errors.js';
import { publishStoreError } from '../diagnostics.js';
import type { HeaderField } from '../headers.js';
import { sanitizeKey } from '../limiter.js';
import { type NodeResponse, whenGone } from '../node/lifetime.js';
import { capacityRefusal, type Refusal, refusal } from '../response.js';
import type { Decision, RuleResult } from '../types.js';
import { type ConcurrencyOptions, type ConcurrencySettings, concurrencySettings } from './concurrency-options.js';
import { WaitQueue } from './concurrency-queue.js';
import { type Attempt, HeldSlots } from './concurrency-slots.js';
import { type ResponseLike, requestOf } from './hold.js';
import { controlDecision } from './publish.js';
import type { SlotStore } from './slot-store.js';

export type { ConcurrencyOptions } from './concurrency-options.js';

/** One limit's figures, for headers. */
export interface ConcurrencyFigures {
  /** Policy name: `name` for the per-key limit, `<name>-global` for the global one. */
  name: string;
  scope: 'key' | 'global';
  limit: number;
  /** Slots held under this limit after the decision. */
  inFlight: number;
}

export type ConcurrencyOutcome =
  | { admitted: true; figures: ConcurrencyFigures[]; waitedMs: number; release: () => void }
  | {
      admitted: false;
      reason: 'full' | 'queue-full' | 'queue-timeout';
      scope: 'key' | 'global';
      status: 429 | 503;
      retryAfterMs: number;
      figures: ConcurrencyFigures[];
    }
  | { admitted: false; reason: 'aborted' };

export interface ConcurrencyLimit<R = unknown> {
  readonly name: string;
  readonly store: SlotStore;
  /**
   * Takes a slot for the request, waiting in the queue if allowed. Resolves
   * `undefined` when skipped. If `signal` aborts while waiting (the client went away)
   * it resolves `{ reason: 'aborted' }` and takes nothing.
   */
  acquire(req: R, signal?: AbortSignal): Promise<ConcurrencyOutcome | undefined>;
  /** Slots held under the request's key and globally, as the store sees them now. */
  count(req: R): Promise<{ key: number | undefined; global: number | undefined }>;
  /** Slots this instance holds now. */
  readonly held: number;
  /** Requests waiting in this instance's queue now. */
  readonly waiting: number;
  /** Refuses every waiter, stops background timers, closes a store it created. */
  close(): Promise<void>;
}

/**
 * Creates a concurrency limit.
 * @example
 * const limit = createConcurrency({ max: 3, queue: 10, queueTimeout: '5s' });
 * const o = await limit.acquire(req, abortSignal);
 * if (o?.admitted) res.on('close', o.release);
 */
export function createConcurrency<R = unknown>(options: ConcurrencyOptions<R>): ConcurrencyLimit<R> {
  const s = concurrencySettings(options);
  const { name, store } = s;
  const slots = new HeldSlots(s);
  const queue = new WaitQueue(s, slots, admit);
  const instance = randomUUID().slice(0, 12);
  let seq = 0;

  function admit(id: string, key: string | undefined, a: Attempt & { ok: true }, waitedMs: number): ConcurrencyOutcome {
    slots.hold(id, a.taken);
    let released = false;
    return {
      admitted: true,
      figures: a.figures,
      waitedMs,
      release() {
        if (released) return;
        released = true;
        slots
          .release(id)
          ?.catch(() => {
            // A lost release is recovered by lease expiry; nothing else can be done here.
          })
          .finally(() => queue.pump(key));
      },
    };
  }

  return {
    name,
    store,
    get held() {
      return slots.size;
    },
    get waiting() {
      return queue.size;
    },
    async acquire(req, signal) {
      if (await skipOf(s.skip, s.path, req)) return undefined;
      if (signal?.aborted) return { admitted: false, reason: 'aborted' };
      const key = await keyOf(s, req);
      if (key === undefined && s.global === undefined) return undefined;
      const id = `${instance}:${++seq}`;
      const first = await slots.attempt(key, id);
      if (first.ok) {
        if (signal?.aborted) {
          await slots.giveBack(first.taken, id);
          return { admitted: false, reason: 'aborted' };
        }
        return admit(id, key, first, 0);
      }
      // The client may have left while the store answered: an aborted signal never fires again.
      if (signal?.aborted) return { admitted: false, reason: 'aborted' };
      return queue.enter(id, key, first, signal);
    },
    async count(req) {
      const key = await keyOf(s, req);
      return {
        key: key === undefined ? undefined : await store.count(s.keySlot(key)),
        global: s.global === undefined ? undefined : await store.count(s.globalSlot),
      };
    },
    async close() {
      queue.close();
      slots.close();
      if (s.ownStore) await store.close();
    },
  };
}

/** The request's key under the per-key limit (undefined without one, or when `key` gives none). */
async function keyOf<R>(s: ConcurrencySettings<R>, req: R): Promise<string | undefined> {
  if (s.max === undefined) return undefined;
  let k: unknown;
  try {
    k = await s.keyFn(req);
  } catch (err) {
    throw markAppError(err);
  }
  if (k === undefined || k === null) return undefined;
  if (typeof k === 'string') return sanitizeKey(k);
  if ((typeof k === 'number' && Number.isFinite(k)) || typeof k === 'bigint') return sanitizeKey(String(k));
  throw callbackResultError(
    `${s.path}.key`,
    'a string, a number, undefined or null (or a promise of one)',
    k,
    'Return an id, not the object that holds it.',
  );
}

/**
 * draft-10 header items for concurrency figures: the quota unit is
 * `concurrent-requests` and there is no window or reset time.
 * `RateLimit-Policy: "concurrency";q=3;qu="concurrent-requests"`, `RateLimit: "concurrency";r=2`.
 */
export function concurrencyHeaderFields(figures: readonly ConcurrencyFigures[]): HeaderField[] {
  if (figures.length === 0) return [];
  return [
    { name: 'RateLimit-Policy', value: figures.map((f) => `"${f.name}";q=${f.limit};qu="concurrent-requests"`).join(', '), append: true },
    { name: 'RateLimit', value: figures.map((f) => `"${f.name}";r=${Math.max(0, f.limit - f.inFlight)}`).join(', '), append: true },
  ];
}

/** The response for a refused request: 429 with a problem body naming the policy, or 503 for the global limit. */
export function concurrencyRefusal(
  outcome: ConcurrencyOutcome & { admitted: false; reason: 'full' | 'queue-full' | 'queue-timeout' },
): Refusal {
  if (outcome.status === 503) {
    return capacityRefusal(outcome.retryAfterMs, 'Too many requests are in progress on this server; try again shortly.');
  }
  const failed = outcome.figures.find((f) => f.scope === outcome.scope);
  const names = failed ? [failed.name] : [];
  const r = refusal({
    allowed: false,
    delayMs: 0,
    retryAfterMs: outcome.retryAfterMs,
    rejectedBy: names,
    dryRunRejectedBy: [],
    rules: [],
    at: 0,
  });
  r.body.detail = `Too many concurrent requests for policy ${names.map((n) => `"${n}"`).join(', ')}; wait for one to finish.`;
  return r;
}

/** The outcome as a `Decision` (for diagnostics): one rule per limit, `r` as slots left. */
export function concurrencyDecision(outcome: Exclude<ConcurrencyOutcome, { reason: 'aborted' }>, at = Date.now()): Decision {
  const refused = outcome.admitted ? undefined : outcome;
  const rules: RuleResult[] = outcome.figures.map((f) => ({
    name: f.name,
    allowed: f.scope !== refused?.scope,
    limit: f.limit,
    remaining: Math.max(0, f.limit - f.inFlight),
    windowMs: 0,
    resetMs: 0,
    retryAfterMs: f.scope === refused?.scope ? refused.retryAfterMs : 0,
    delayMs: 0,
  }));
  return controlDecision(rules, refused === undefined, refused?.retryAfterMs ?? 0, 0, at);
}

/**
 * How adapters take a slot: `limit.acquire`, giving up the queue wait when the client
 * disconnects (`close` on Node's response, `raw`), then `answer(req, res, next, outcome)`
 * with the adapter's own objects. A failing slot store lets the request through without
 * a slot: the failure is published and `answer` gets `undefined`, as for a request the
 * limit does not apply to.
 * @example acquireWhileConnected(limit, req, res, res, next, answer) // Express; Fastify passes reply.raw, reply
 */
export function acquireWhileConnected<R, S, N>(
  limit: ConcurrencyLimit<R>,
  req: R,
  raw: ResponseLike,
  res: S,
  next: N,
  answer: (req: R, res: S, next: N, outcome: ConcurrencyOutcome | undefined) => void,
): void {
  const abort = new AbortController();
  const onClose = () => abort.abort();
  const nodeReq = requestOf(raw);
  // A Node response: the client's departure as the pipeline sees it (pipelined requests too).
  const stop =
    nodeReq !== undefined ? whenGone(nodeReq, raw as unknown as NodeResponse, onClose) : () => raw.removeListener('close', onClose);
  if (nodeReq === undefined) raw.once('close', onClose);
  limit.acquire(req, abort.signal).then(
    (o) => {
      stop();
      answer(req, res, next, o);
    },
    (err) => {
      stop();
      publishStoreError(err, req, limit.name, 'allow');
      answer(req, res, next, undefined);
    },
  );
}
