/**
 * The concurrency limit, framework-agnostic.
 *
 * At most `max` requests in flight per key and/or `global` in total, each holding a
 * slot in a `SlotStore` from admission until its response is over. A refused request
 * may wait in a bounded FIFO queue (`queue`, `queueTimeout`) for a slot to free up.
 * A per-key refusal is the client's doing (429); a global one is the server's (503).
 *
 * Slots are released exactly once (`release` is idempotent; adapters call it from
 * `onceDone`). With a store that `leases` (Redis) every held slot is renewed by one
 * background timer per control, so a crashed instance's slots expire on their own.
 * Waiters are woken by local releases, and with a `shared` store also by polling,
 * since a slot freed by another instance sends no signal.
 */
import { randomUUID } from 'node:crypto';
import { callbackResultError, guardAppFn, markAppError, skipOf } from '../app-errors.js';
import { publishInFlight, publishStoreError } from '../diagnostics.js';
import type { Duration } from '../duration.js';
import { configError } from '../errors.js';
import type { HeaderField } from '../headers.js';
import { ip } from '../keys.js';
import { hashedKey, sanitizeKey } from '../limiter.js';
import { type NodeResponse, whenGone } from '../node/lifetime.js';
import { capacityRefusal, type Refusal, refusal } from '../response.js';
import type { KeyFn } from '../rules.js';
import type { Decision, RuleResult } from '../types.js';
import { type ResponseLike, requestOf } from './hold.js';
import { boundedDuration, checkOptions, MAX_TIMER_MS, optionalFn, wholeNumber } from './options.js';
import { controlDecision } from './publish.js';
import { MemorySlotStore, type SlotGrant, type SlotStore } from './slot-store.js';
import { systemTimers, type TimerHandle, type Timers } from './timers.js';

export interface ConcurrencyOptions<R = unknown> {
  /**
   * Most requests in flight per key (refusal: 429).
   * @example 3
   */
  max?: number;
  /**
   * Most requests in flight in total, across keys (refusal: 503). With a shared store
   * (Redis) this is across every instance.
   * @example 100
   */
  global?: number;
  /**
   * Requests that may wait for a slot, per key for the per-key limit and in total for
   * the global one. 0 refuses at once.
   * @default 0
   */
  queue?: number;
  /**
   * The longest a request waits in the queue before it is refused.
   * @default '10s'
   */
  queueTimeout?: Duration;
  /**
   * What to count under.
   * @default ip()
   */
  key?: KeyFn<R>;
  /**
   * Requests for which this returns true take no slot.
   * @example (req) => req.url === '/health'
   */
  skip?: (req: R) => boolean | Promise<boolean>;
  /**
   * The policy name in headers; the global limit is `<name>-global`.
   * @default 'concurrency'
   */
  name?: string;
  /**
   * Where slots are held.
   * @default new MemorySlotStore()
   */
  store?: SlotStore;
  /**
   * Lease length for stores that lease (Redis): a slot whose holder stops renewing it
   * (a crashed instance) frees itself this long after the last renewal. Held slots are
   * renewed every third of it.
   * @default '30s'
   */
  lease?: Duration;
  /**
   * How often waiters retry when the store is shared by other instances.
   * @default '100ms'
   */
  pollInterval?: Duration;
  /**
   * `Retry-After` of a refusal: a slot frees up when some response ends, which no one
   * can predict.
   * @default '1s'
   */
  retryAfter?: Duration;
  /**
   * Namespace of the slot keys.
   * @default 'tg-cc'
   */
  prefix?: string;
  /** Timer source (tests pass `ManualTimers`). @default systemTimers */
  timers?: Timers;
  /** The key of a limit that names none (adapters pass their trusted-proxy aware `ip()`). */
  defaultKey?: KeyFn<R>;
}

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

interface Waiter {
  id: string;
  key: string | undefined;
  /** The limit that refused it when it joined the queue (its place is counted there). */
  scope: 'key' | 'global';
  /** The limit that refused its latest attempt (decides 429 or 503 on timeout). */
  blockedOn: 'key' | 'global';
  since: number;
  timer: TimerHandle;
  done: (outcome: ConcurrencyOutcome) => void;
}

type Attempt =
  | { ok: true; taken: string[]; figures: ConcurrencyFigures[] }
  | { ok: false; scope: 'key' | 'global'; figures: ConcurrencyFigures[] };

const KNOWN = [
  'max',
  'global',
  'queue',
  'queueTimeout',
  'key',
  'skip',
  'name',
  'store',
  'lease',
  'pollInterval',
  'retryAfter',
  'prefix',
  'timers',
  'defaultKey',
] as const;
const NAME_RE = /^[\x21\x23-\x5b\x5d-\x7e]{1,57}$/;
/** The global slot's last segment, `<prefix>:<name>:*`, kept as it was so instances of either version count together. */
const GLOBAL = '*';

/**
 * Creates a concurrency limit.
 * @example
 * const limit = createConcurrency({ max: 3, queue: 10, queueTimeout: '5s' });
 * const o = await limit.acquire(req, abortSignal);
 * if (o?.admitted) res.on('close', o.release);
 */
export function createConcurrency<R = unknown>(options: ConcurrencyOptions<R>): ConcurrencyLimit<R> {
  const path = 'concurrency';
  checkOptions(options, KNOWN, path);
  const o = options as ConcurrencyOptions<R>;
  const max = o.max === undefined ? undefined : wholeNumber(o.max, `${path}.max`, 1);
  const global = o.global === undefined ? undefined : wholeNumber(o.global, `${path}.global`, 1);
  if (max === undefined && global === undefined) {
    throw configError('TG_INVALID_OPTION', {
      path,
      expected: 'max (per key), global (in total), or both',
      received: 'neither',
      fix: 'Pass e.g. { max: 3 } or { global: 100 }.',
    });
  }
  const queue = o.queue === undefined ? 0 : wholeNumber(o.queue, `${path}.queue`, 0);
  const queueTimeoutMs = o.queueTimeout === undefined ? 10_000 : boundedDuration(o.queueTimeout, `${path}.queueTimeout`, MAX_TIMER_MS);
  const leaseMs = o.lease === undefined ? 30_000 : boundedDuration(o.lease, `${path}.lease`, MAX_TIMER_MS);
  const pollMs = o.pollInterval === undefined ? 100 : boundedDuration(o.pollInterval, `${path}.pollInterval`, MAX_TIMER_MS);
  const retryAfterMs = o.retryAfter === undefined ? 1000 : boundedDuration(o.retryAfter, `${path}.retryAfter`, MAX_TIMER_MS);
  const rawSkip = optionalFn<(req: R) => unknown>(o.skip, `${path}.skip`, '(req) => boolean');
  const skip = rawSkip === undefined ? undefined : guardAppFn(rawSkip);
  const rawKey = optionalFn<KeyFn<R>>(o.key, `${path}.key`, '(req) => string | undefined');
  // The app's callbacks: what they throw or reject with is the app's error, never a store failure.
  const keyFn: (req: R) => unknown = rawKey !== undefined ? guardAppFn(rawKey) : (o.defaultKey ?? (ip() as KeyFn<R>));
  const name = o.name ?? 'concurrency';
  if (typeof name !== 'string' || !NAME_RE.test(name)) {
    throw configError('TG_INVALID_OPTION', {
      path: `${path}.name`,
      expected: 'a name of 1 to 57 visible ASCII characters without quotes or backslashes',
      received: JSON.stringify(name),
      fix: 'Use a short name such as "concurrency"; it appears in headers.',
    });
  }
  const prefix = o.prefix ?? 'tg-cc';
  const store = o.store ?? new MemorySlotStore();
  const ownStore = o.store === undefined;
  const timers = o.timers ?? systemTimers;
  const globalName = `${name}-global`;
  const globalSlot = `${prefix}:${encodeURIComponent(name)}:${GLOBAL}`;
  // A client whose key is `*` is stored hashed, as any key sanitizeKey does not keep: the
  // global slot's name is never a client's (see docs/decisions.md, "Key namespaces").
  const keySlot = (k: string) => `${prefix}:${encodeURIComponent(name)}:${k === GLOBAL ? hashedKey(k) : k}`;
  const instance = randomUUID().slice(0, 12);
  let seq = 0;

  /** Slot keys each admitted request holds, by request id. */
  const held = new Map<string, string[]>();
  const waiters = new Set<Waiter>();
  const waitingByKey = new Map<string, number>();
  let waitingGlobal = 0;
  let renewTimer: TimerHandle | undefined;
  let pollTimer: TimerHandle | undefined;
  let pumping = false;
  /** Keys released since the last pass (and whether everyone should be asked again). */
  const dirty = new Set<string>();
  let dirtyGlobal = false;
  let dirtyAll = false;
  let closed = false;

  async function resolveKey(req: R): Promise<string | undefined> {
    if (max === undefined) return undefined;
    let k: unknown;
    try {
      k = await keyFn(req);
    } catch (err) {
      throw markAppError(err);
    }
    if (k === undefined || k === null) return undefined;
    if (typeof k === 'string') return sanitizeKey(k);
    if ((typeof k === 'number' && Number.isFinite(k)) || typeof k === 'bigint') return sanitizeKey(String(k));
    throw callbackResultError(
      `${path}.key`,
      'a string, a number, undefined or null (or a promise of one)',
      k,
      'Return an id, not the object that holds it.',
    );
  }

  const skipped = (req: R): Promise<boolean> => skipOf(skip, path, req);

  async function attempt(key: string | undefined, id: string): Promise<Attempt> {
    const figures: ConcurrencyFigures[] = [];
    const taken: string[] = [];
    if (key !== undefined && max !== undefined) {
      const slot = keySlot(key);
      const g = await store.acquire(slot, id, max, leaseMs);
      figures.push({ name, scope: 'key', limit: max, inFlight: g.inFlight });
      if (!g.acquired) return { ok: false, scope: 'key', figures };
      taken.push(slot);
    }
    if (global !== undefined) {
      let g: SlotGrant;
      try {
        g = await store.acquire(globalSlot, id, global, leaseMs);
      } catch (err) {
        // Never keep half a pair: the per-key slot goes back before the failure surfaces.
        await Promise.allSettled(taken.map((slot) => store.release(slot, id)));
        throw err;
      }
      figures.push({ name: globalName, scope: 'global', limit: global, inFlight: g.inFlight });
      if (!g.acquired) {
        // All or nothing: give back the per-key slot taken a moment ago.
        await Promise.all(taken.map((slot) => store.release(slot, id)));
        if (figures[0]?.scope === 'key') figures[0].inFlight--;
        return { ok: false, scope: 'global', figures };
      }
      taken.push(globalSlot);
    }
    return { ok: true, taken, figures };
  }

  function admit(id: string, key: string | undefined, a: Attempt & { ok: true }, waitedMs: number): ConcurrencyOutcome {
    held.set(id, a.taken);
    publishInFlight(name, 'concurrency', held.size, global);
    scheduleRenewal();
    let released = false;
    return {
      admitted: true,
      figures: a.figures,
      waitedMs,
      release() {
        if (released) return;
        released = true;
        const slots = held.get(id);
        held.delete(id);
        publishInFlight(name, 'concurrency', held.size, global);
        if (slots === undefined || slots.length === 0) return;
        Promise.all(slots.map((slot) => store.release(slot, id)))
          .catch(() => {
            // A lost release is recovered by lease expiry; nothing else can be done here.
          })
          .finally(() => pump(key));
      },
    };
  }

  function refuse(
    scope: 'key' | 'global',
    reason: 'full' | 'queue-full' | 'queue-timeout',
    figures: ConcurrencyFigures[],
  ): ConcurrencyOutcome {
    return { admitted: false, reason, scope, status: scope === 'key' ? 429 : 503, retryAfterMs, figures };
  }

  function scheduleRenewal(): void {
    if (!store.leases || renewTimer !== undefined || held.size === 0 || closed) return;
    renewTimer = timers.setTimeout(
      () => {
        renewTimer = undefined;
        const renewals: Promise<boolean>[] = [];
        for (const [id, slots] of held) for (const slot of slots) renewals.push(store.renew(slot, id, leaseMs));
        Promise.allSettled(renewals).finally(scheduleRenewal);
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    timers.unref?.(renewTimer);
  }

  function schedulePoll(): void {
    if (!store.shared || pollTimer !== undefined || waiters.size === 0 || closed) return;
    pollTimer = timers.setTimeout(() => {
      pollTimer = undefined;
      pump(undefined, true);
      schedulePoll();
    }, pollMs);
  }

  function leave(w: Waiter): boolean {
    if (!waiters.delete(w)) return false;
    timers.clearTimeout(w.timer);
    if (w.scope === 'key' && w.key !== undefined) {
      const n = (waitingByKey.get(w.key) ?? 1) - 1;
      if (n > 0) waitingByKey.set(w.key, n);
      else waitingByKey.delete(w.key);
    } else waitingGlobal--;
    if (waiters.size === 0 && pollTimer !== undefined) {
      timers.clearTimeout(pollTimer);
      pollTimer = undefined;
    }
    return true;
  }

  /**
   * Offers free slots to waiters, oldest first; one pass per burst of releases. A release
   * under key K can only help waiters of K and waiters held up by the global limit, so
   * only those are asked again (`dirty`); a poll of a shared store asks everyone.
   */
  function pump(released: string | undefined, everyone = false): void {
    dirtyGlobal = true;
    if (everyone) dirtyAll = true;
    else if (released !== undefined) dirty.add(released);
    if (pumping) return;
    pumping = true;
    (async () => {
      while ((dirtyAll || dirtyGlobal || dirty.size > 0) && waiters.size > 0 && !closed) {
        const all = dirtyAll;
        const keys = new Set(dirty);
        dirtyAll = false;
        dirtyGlobal = false;
        dirty.clear();
        for (const w of [...waiters]) {
          if (!waiters.has(w)) continue;
          if (!all && w.blockedOn === 'key' && (w.key === undefined || !keys.has(w.key))) continue;
          const a = await attempt(w.key, w.id);
          if (!waiters.has(w)) {
            // Timed out or aborted while we asked: give the slot straight back.
            if (a.ok) await Promise.all(a.taken.map((slot) => store.release(slot, w.id)));
            continue;
          }
          if (a.ok) {
            leave(w);
            w.done(admit(w.id, w.key, a, now() - w.since));
          } else w.blockedOn = a.scope;
        }
      }
    })()
      .catch(() => {
        // A failing store leaves waiters to their timeout.
      })
      .finally(() => {
        pumping = false;
        dirtyAll = false;
        dirtyGlobal = false;
        dirty.clear();
      });
  }

  // Waiting time is only reported, so any monotonic-enough reading will do.
  const now = () => Date.now();

  return {
    name,
    store,
    get held() {
      return held.size;
    },
    get waiting() {
      return waiters.size;
    },
    async acquire(req, signal) {
      if (await skipped(req)) return undefined;
      if (signal?.aborted) return { admitted: false, reason: 'aborted' };
      const key = await resolveKey(req);
      if (key === undefined && global === undefined) return undefined;
      const id = `${instance}:${++seq}`;
      const first = await attempt(key, id);
      if (first.ok) {
        if (signal?.aborted) {
          await Promise.all(first.taken.map((slot) => store.release(slot, id)));
          return { admitted: false, reason: 'aborted' };
        }
        return admit(id, key, first, 0);
      }
      // The client may have left while the store answered: an aborted signal never fires again.
      if (signal?.aborted) return { admitted: false, reason: 'aborted' };
      const scope = first.scope;
      if (queue === 0 || closed) return refuse(scope, 'full', first.figures);
      const waitingHere = scope === 'key' && key !== undefined ? (waitingByKey.get(key) ?? 0) : waitingGlobal;
      if (waitingHere >= queue) return refuse(scope, 'queue-full', first.figures);
      return new Promise<ConcurrencyOutcome>((resolve) => {
        const onAbort = () => {
          if (leave(w)) resolve({ admitted: false, reason: 'aborted' });
        };
        const w: Waiter = {
          id,
          key,
          scope,
          blockedOn: scope,
          since: now(),
          timer: timers.setTimeout(() => {
            if (leave(w)) {
              signal?.removeEventListener('abort', onAbort);
              resolve(refuse(w.blockedOn, 'queue-timeout', first.figures));
            }
          }, queueTimeoutMs),
          done: (outcome) => {
            signal?.removeEventListener('abort', onAbort);
            resolve(outcome);
          },
        };
        waiters.add(w);
        if (scope === 'key' && key !== undefined) waitingByKey.set(key, waitingHere + 1);
        else waitingGlobal++;
        signal?.addEventListener('abort', onAbort, { once: true });
        schedulePoll();
        // A release may have slipped in between our refusal and joining the queue.
        pump(key);
      });
    },
    async count(req) {
      const key = await resolveKey(req);
      return {
        key: key === undefined ? undefined : await store.count(keySlot(key)),
        global: global === undefined ? undefined : await store.count(globalSlot),
      };
    },
    async close() {
      closed = true;
      for (const w of [...waiters]) if (leave(w)) w.done({ admitted: false, reason: 'aborted' });
      if (renewTimer !== undefined) timers.clearTimeout(renewTimer);
      if (pollTimer !== undefined) timers.clearTimeout(pollTimer);
      renewTimer = undefined;
      pollTimer = undefined;
      if (ownStore) await store.close();
    },
  };
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
