/**
 * `RedisStore`: the store for many instances. Its parts, each readable alone: options.ts
 * (options, events, validation), batch.ts (a tick's stacks as one script run, deadlines),
 * cluster.ts (runs by slot, reserve-then-refund), args.ts (the wire format), script.ts
 * (FCALL or EVALSHA), deny-cache.ts and lease/ (the `lease` option); this file is the
 * store itself.
 *
 * Every decision is one Lua script (`lua/`), a line-for-line mirror of the core's
 * `decideStack`, so read-decide-write is atomic in Redis and concurrent instances never
 * admit more than the limit. Time is Redis' `TIME` unless a clock or `now` is supplied.
 * On a Cluster, ops are grouped by slot: one group is one round trip; several groups are
 * decided in parallel and, if any rejects, the groups that admitted are refunded
 * (reserve-then-refund; the bound is in docs/distributed.md).
 *
 * Failure policy: every call races a `timeoutMs` deadline (batched stacks share their
 * tick's, armed when the first was asked); failures feed a breaker; while Redis cannot
 * answer, `onStoreError` decides (`'local'` by default). Failures and breaker changes are
 * events (`'error'` only when someone listens, so nothing is ever thrown at the app; a
 * listener that throws is caught and reported, see #tell) and diagnostics-channel messages.
 */
import { EventEmitter } from 'node:events';
import {
  type Clock,
  checkTime,
  type KeyOp,
  type RuleSpec,
  type Store,
  type StoreDecision,
  type StoreKeyState,
  type StoreOp,
  sanitizeKey,
} from '@tollgate/core';
import { type Command, keyOpArgs, parseKeyState, refundArgs, settleArgs } from './args.js';
import { Batcher, type PendingStack } from './batch.js';
import { Breaker, type BreakerState } from './breaker.js';
import { redisChannels } from './channels.js';
import { checkOnConnect, warn } from './checks.js';
import { portOf, type RedisPort } from './client.js';
import { SlotRuns } from './cluster.js';
import { DenyCache, signature } from './deny-cache.js';
import { closedError, timeoutError } from './errors.js';
import { allowAll, denyAll, LocalFallback, type StoreErrorPolicy } from './fallback.js';
import { redisKey } from './keys.js';
import { LeaseCalls } from './lease/calls.js';
import { guardedLeaseCall } from './lease/guard.js';
import { Leases } from './lease/leases.js';
import { leaseSettings } from './lease/options.js';
import { operatorCall } from './operator.js';
import { type BreakerEvent, type RedisStoreOptions, type StoreErrorEvent, validate } from './options.js';
import { type RedisClientLike, runKeyOp, runnerOf, type ScriptRunner } from './script.js';

export type { BreakerEvent, RedisStoreOptions, StoreErrorEvent } from './options.js';

const OP_NAMES = { c: 'consume', p: 'peek', r: 'refund', s: 'settle' } as const;
/**
 * The store for many instances: every decision is one atomic script call in Redis, on
 * Redis time, with a deadline (`timeoutMs`), a failure policy (`onStoreError`), a breaker
 * and a local deny cache. It emits `'error'` events only if you listen; failures are
 * published on `tollgate:store-error` either way. The ioredis client is yours: `close()`
 * does not quit it.
 * @example
 * import { Redis } from 'ioredis';
 * const store = new RedisStore({ client: new Redis(process.env.REDIS_URL), timeoutMs: 50 });
 * app.use(rateLimit({ rules: [{ name: 'ip', rate: '100/min' }], store }));
 */
export class RedisStore extends EventEmitter implements Store {
  readonly client: RedisClientLike;
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly onStoreError: StoreErrorPolicy;
  /** The client's operations (client.ts): every Redis call goes through it. */
  readonly #port: RedisPort;
  /** The port's script runner (shared by the stores on the client), kept for the hot path. */
  readonly #runner: ScriptRunner;
  readonly #clock: Clock | undefined;
  readonly #hashTag: ((ruleName: string, key: string) => string) | undefined;
  readonly #breaker: Breaker;
  readonly #deny: DenyCache | undefined;
  readonly #local: LocalFallback;
  readonly #minTtl: string;
  /** Standalone Redis with `batch`: stacks asked in the same tick share one script run. */
  readonly #batches: Batcher | undefined;
  /** The script runs by Cluster slot (cluster.ts). */
  readonly #slots: SlotRuns;
  /** Per rule, its last key and that key's Redis key (see keyOf). */
  readonly #lastKeys = new WeakMap<RuleSpec, { key: string; redisKey: string }>();
  #closed = false;
  /**
   * Settles (never rejects) when the connect-time checks are done, or the store is closed
   * first: Redis' `maxmemory-policy` and, with a supplied `clock`, its distance from Redis
   * `TIME` (checks.ts), run once the client is ready. Each finding is a coded process
   * warning and a `tollgate:redis:warning` message.
   */
  readonly checked: Promise<void>;
  readonly #cancelChecks: () => void;
  /** Leases (lease/), when the `lease` option is given. */
  readonly #leases: Leases | undefined;
  /** Listeners that threw or rejected (see #tell). */
  #listenerFailures = 0;

  constructor(options: RedisStoreOptions) {
    super();
    validate(options);
    const lease = options.lease === undefined ? undefined : leaseSettings(options.lease, options.instances ?? 1);
    this.client = options.client;
    this.#port = portOf(options.client) as RedisPort;
    this.#runner = runnerOf(this.#port);
    this.prefix = options.prefix ?? '';
    this.timeoutMs = options.timeoutMs ?? 100;
    this.onStoreError = options.onStoreError ?? 'local';
    this.#clock = options.clock === undefined || options.clock === 'redis' ? undefined : options.clock;
    this.#hashTag = options.hashTag;
    this.#minTtl = String(options.minTtlMs ?? 1000);
    this.#slots = new SlotRuns(this.#port, this.#minTtl);
    this.#batches =
      (options.batch ?? true) && !this.#port.cluster
        ? new Batcher(this.#runner, this.#minTtl, this.timeoutMs, {
            // A settle's answer says only that Redis answered.
            answered: (p, d) => (p.cmd === 's' ? this.#breaker.success() : this.#answered(p.cmd, p.ops, p.keys, p.now, d)),
            fail: (p, err) => this.#fail(p, err),
          })
        : undefined;
    const localNow = () => performance.now();
    this.#breaker = new Breaker(
      { failures: options.breaker?.failures ?? 3, cooldownMs: options.breaker?.cooldownMs ?? 1000 },
      localNow,
      (from, to, failures) => this.#breakerChanged({ from, to, failures }),
    );
    const dc = options.denyCache ?? true;
    this.#deny = dc === false ? undefined : new DenyCache(dc === true ? 10_000 : dc, localNow);
    this.#local = new LocalFallback(options.instances ?? 1, this.#clock);
    const checks = checkOnConnect(this, this.#port, this.#clock);
    this.checked = checks.done;
    this.#cancelChecks = checks.cancel;
    // FCALL or EVALSHA: chosen for the client now, not by the first decision.
    this.#runner.prepare();
    // --- lease hook: the store's machinery a lease goes through (lease/leases.ts, lease/guard.ts) ---
    this.#leases =
      lease === undefined
        ? undefined
        : new Leases(lease, {
            keyOf: (rule, key, raw) => this.keyOf(rule, key, raw),
            time: (now) => this.#time(now),
            oneCall: (keys) => this.#slots.oneRun(keys),
            lease: guardedLeaseCall({
              calls: new LeaseCalls(this.#port, this.#minTtl, lease.share, options.batch ?? true),
              deny: this.#deny,
              breaker: this.#breaker,
              closed: () => this.#closed,
              deadline: (p) => this.#deadline(p),
              degraded: (ops, t) => this.#degraded('c', ops, t),
              answered: (ops, keys, t, d) => this.#answered('c', ops, keys, t, d),
              failed: (err, operation) => this.#failed(err, operation, operation === 'consume' ? this.onStoreError : 'none'),
              refund: (ops, keys, at, t) => this.#slots.giveBack(refundArgs, ops, keys, at, t),
              giveBackTime: (t) => (this.#leases as Leases).giveBackTime(t),
              late: (answered) => (this.#leases as Leases).late(answered),
            }),
            exact: (cmd, ops, now) => this.#decide(cmd, ops, now),
            // Never rejects (nothing awaits a give-back): a failure is reported, its units stay counted.
            giveBack: (ops, at, t) => this.#giveBack('refund', ops, at, t, true).catch((err) => this.#failed(err, 'refund', 'none', false)),
          });
    const leases = this.#leases;
    if (leases !== undefined) {
      this.consumeLocal = (ops, now) => {
        if (this.#closed) return undefined;
        return leases.local(ops, now === undefined && this.#clock === undefined ? undefined : this.#time(now), true);
      };
    }
  }

  /**
   * With leases: a decision taken from them synchronously, or undefined (then `consume`).
   * Absent without the `lease` option, so the engine never asks.
   */
  declare consumeLocal?: (ops: readonly StoreOp[], now?: number) => StoreDecision | undefined;

  /** Unused leased units this instance holds for a (rule, key): 0 without leases. */
  leased(rule: RuleSpec, key: string, raw?: string): number {
    return this.#leases?.held(this.keyOf(rule, key, raw)) ?? 0;
  }

  /** The breaker's state: `'closed'` while Redis answers. */
  get breakerState(): BreakerState {
    return this.#breaker.state;
  }

  /**
   * How many times an `'error'` or `'breaker'` listener threw (or, async, rejected): each
   * was caught, and the first reported as the process warning `TOLLGATE_REDIS_LISTENER_FAILED`.
   */
  get listenerFailures(): number {
    return this.#listenerFailures;
  }

  /**
   * The Redis key of a (rule, key): for tools and tests that inspect Redis. `raw` is the key
   * before sanitising (`StoreOp.raw`), which a `hashTag` function is given; without it, `key`.
   */
  keyOf(rule: RuleSpec, key: string, raw?: string): string {
    if (this.#hashTag === undefined) {
      // The last key of each rule and its Redis key: a constant key (a tenant's, a route's,
      // a global rule's) gets the same string every time, built and hashed once.
      const last = this.#lastKeys.get(rule);
      if (last === undefined) {
        const k = redisKey(this.prefix, rule.id, key, undefined);
        this.#lastKeys.set(rule, { key, redisKey: k });
        return k;
      }
      if (last.key !== key) {
        last.key = key;
        last.redisKey = redisKey(this.prefix, rule.id, key, undefined);
      }
      return last.redisKey;
    }
    // The app's function, run per request on the key its rule returned (a key with a space,
    // non-ASCII text or over 128 characters is sanitised to a hash, which no recipe can
    // split): a number (a numeric tenant id) is its text, as for rule keys; undefined or
    // null falls back to the default layout. The tag is sanitised like a key: bounded and
    // brace-free whatever the client sent, and equal tags still give one slot.
    const tag: unknown = this.#hashTag(rule.name, raw ?? key);
    return redisKey(this.prefix, rule.id, key, tag === undefined || tag === null ? undefined : sanitizeKey(String(tag)));
  }

  /** The supplied time (given, or the store's clock), checked; undefined for Redis time. */
  #time(now: number | undefined): number | undefined {
    if (now === undefined && this.#clock === undefined) return undefined;
    return checkTime(now ?? this.#clock?.now(), 'RedisStore: now');
  }

  consume(ops: readonly StoreOp[], now?: number): Promise<StoreDecision> {
    if (this.#leases !== undefined && !this.#closed) return this.#leases.consume(ops, now);
    return this.#decide('c', ops, now);
  }

  peek(ops: readonly StoreOp[], now?: number): Promise<StoreDecision> {
    if (this.#leases !== undefined && !this.#closed) return this.#leases.peek(ops, now);
    return this.#decide('p', ops, now);
  }

  refund(ops: readonly StoreOp[], at: number, now?: number, degraded?: 'local'): Promise<void> {
    if (degraded === 'local') return this.#giveBackLocally('refund', ops, at, now);
    return this.#giveBack('refund', ops, at, now);
  }

  /**
   * Settles a reservation (see `Store.settle`): one atomic call (per slot on a Cluster
   * whose keys span slots, as a refund), each op's cost the actual cost less the estimate.
   */
  settle(ops: readonly StoreOp[], at: number, now?: number, degraded?: 'local'): Promise<void> {
    if (degraded === 'local') return this.#giveBackLocally('settle', ops, at, now);
    return this.#giveBack('settle', ops, at, now);
  }

  /**
   * A refund or settle of a decision the local fallback made: its units were counted there,
   * whatever the breaker says now (in Redis they would credit units Redis never counted).
   */
  async #giveBackLocally(operation: 'refund' | 'settle', ops: readonly StoreOp[], at: number, now?: number): Promise<void> {
    if (this.#closed) throw closedError();
    const t = this.#time(now);
    checkTime(at, `RedisStore.${operation}: at`);
    await this.#local.store[operation](this.#local.ops(ops), at, t);
  }

  /** A refund or settle, or (`lease`) a lease's unused units going back: checked before anything changes, and a failure rejects. */
  async #giveBack(operation: 'refund' | 'settle', given: readonly StoreOp[], at: number, now?: number, lease = false): Promise<void> {
    if (this.#closed) throw closedError();
    if (given.length === 0) return;
    const t = this.#time(now);
    checkTime(at, `RedisStore.${operation}: at`);
    // What a refund or settle gives back of a decision from a live lease goes back to it; the rest to Redis.
    const ops = lease || this.#leases === undefined ? given : this.#leases[operation](given, at, t);
    if (ops.length === 0) return;
    // A lease's units going back change only their keys' answers.
    const keys = ops.map((op) => this.keyOf(op.rule, op.key, op.raw));
    if (lease) this.#deny?.written(keys);
    else this.#deny?.clear();
    if (!this.#breaker.tryCall()) {
      // Decisions are being made locally: give back (or charge) there; a lease's units were
      // never counted there, so they stay counted in Redis (as a give-back that failed).
      if (this.onStoreError === 'local' && !lease) await this.#local.store[operation](this.#local.ops(ops), at, t);
      return;
    }
    const batches = this.#batches;
    if (batches !== undefined && (operation === 'settle' || lease)) {
      // In the batch of this tick, in the same script run as the decisions asked with it; a
      // lease's give-back as a settle below zero (which refunds as a refund does).
      const sent = lease ? ops.map((op) => ({ ...op, cost: -op.cost })) : ops;
      await new Promise<StoreDecision>((resolve) =>
        batches.enqueue({ cmd: 's', ops: sent, now: t, at, keys, resolve, done: false, leased: lease }),
      );
      return;
    }
    try {
      await this.#deadline(this.#slots.giveBack(operation === 'refund' ? refundArgs : settleArgs, ops, keys, at, t));
      this.#breaker.success();
    } catch (err) {
      this.#failed(err, operation, 'none');
    }
  }

  /**
   * Forgets a (rule, key) in Redis and in the local fallback. An explicit call, not a
   * decision: it goes to Redis whatever the breaker's state, and rejects when Redis did
   * not reset (see operator.ts); the failure is reported too, without counting towards the
   * breaker (a `DEL` refused by an ACL says nothing about decisions).
   */
  async reset(rule: RuleSpec, key: string, raw?: string): Promise<void> {
    if (this.#closed) throw closedError();
    this.#deny?.clear();
    // This instance's lease of the key ends with its state (other instances' within ttl).
    const lift = await this.#leases?.forget(rule, key, raw, false);
    try {
      await this.#local.store.reset(rule, key);
      const k = this.keyOf(rule, key, raw);
      await operatorCall(() => this.#port.command(['DEL', k], k), 'reset', this.timeoutMs);
    } catch (err) {
      this.#failed(err, 'reset', 'none', false);
      throw err;
    } finally {
      lift?.();
    }
  }

  /**
   * One operation on a (rule, key) entry without a request: one atomic call of the
   * library's keys function (or its script), on the key's node of a Cluster. An operator's
   * call is not answered by the failure policy: a failure or a timeout rejects (see
   * operator.ts). An operation id's mark is `<key> op <id>` (no key has a space), in the
   * key's slot. A change drops this instance's deny-cache answers for the key (other instances' run out by
   * themselves, at most at the retry time they were given; see docs/operations.md); a block
   * or unblock is applied to the local fallback too, so it holds while Redis is away.
   */
  async keyOp(rule: RuleSpec, key: string, op: KeyOp, now?: number, raw?: string): Promise<StoreKeyState> {
    if (this.#closed) throw closedError();
    const t = this.#time(now);
    // This instance's lease of the key ends first, its units back before the operation: a
    // change applies to the whole state, and a read counts no held unit as used.
    const lift = await this.#leases?.forget(rule, key, raw, true);
    const k = this.keyOf(rule, key, raw);
    let reply: unknown;
    try {
      const keys = op.kind !== 'get' && op.id !== undefined ? [k, `${k} op ${op.id}`] : [k];
      const args = keyOpArgs(rule, op, t, this.#minTtl);
      reply = await operatorCall(() => runKeyOp(this.#port, keys, args), op.kind, this.timeoutMs, op.kind === 'get');
    } finally {
      lift?.();
    }
    const state = parseKeyState(reply);
    if (op.kind !== 'get') {
      this.#deny?.written([k]);
      if (op.kind === 'block' || op.kind === 'unblock') {
        const local = this.#local.ops([{ rule, key, cost: 0 }])[0] as StoreOp;
        await this.#local.store.keyOp(local.rule, key, op, t);
      }
    }
    return state;
  }

  /** Releases the store's own resources. The client is yours: quit it yourself. */
  async close(): Promise<void> {
    // Leased units not used go back while the store can still call Redis.
    if (!this.#closed) await this.#leases?.close();
    this.#closed = true;
    this.#cancelChecks();
    this.#batches?.close();
    this.#deny?.clear();
    this.#slots.clear();
    await this.#local.store.close();
  }

  /**
   * Not async: on the batched path a decision is one promise, settled from its batch's
   * reply (see batch.ts). Anything thrown before Redis is asked rejects it, as before.
   */
  #decide(cmd: 'c' | 'p', ops: readonly StoreOp[], now: number | undefined): Promise<StoreDecision> {
    try {
      if (this.#closed) throw closedError();
      const t = this.#time(now);
      if (ops.length === 0) return Promise.resolve({ allowed: true, now: t ?? Date.now(), outcomes: [] });
      const n = ops.length;
      const keys: string[] = new Array(n);
      for (let i = 0; i < n; i++) {
        const op = ops[i] as StoreOp;
        keys[i] = this.keyOf(op.rule, op.key, op.raw);
      }
      // The signature is built only when the cache could answer: an empty cache has no hit.
      if (cmd === 'c' && this.#deny !== undefined && this.#deny.size > 0) {
        const hit = this.#deny.get(signature(ops, keys), t);
        if (hit !== undefined) return Promise.resolve(hit);
      }
      if (!this.#breaker.tryCall()) return this.#degraded(cmd, ops, t);
      const batches = this.#batches;
      if (batches === undefined) return this.#decideRemote(cmd, ops, keys, t);
      return new Promise<StoreDecision>((resolve) => {
        batches.enqueue({ cmd, ops, now: t, keys, resolve, done: false });
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** One stack's script run (Cluster, or `batch: false`) under its own deadline. */
  async #decideRemote(cmd: 'c' | 'p', ops: readonly StoreOp[], keys: string[], t: number | undefined): Promise<StoreDecision> {
    try {
      const d = await this.#deadline(this.#slots.decide(cmd, ops, keys, t));
      this.#answered(cmd, ops, keys, t, d);
      return d;
    } catch (err) {
      this.#failed(err, OP_NAMES[cmd], this.onStoreError);
      return this.#degraded(cmd, ops, t);
    }
  }

  /** Bookkeeping of a decision Redis made: the breaker, and the deny cache for a refusal. */
  #answered(cmd: 'c' | 'p', ops: readonly StoreOp[], keys: readonly string[], t: number | undefined, d: StoreDecision): void {
    this.#breaker.success();
    const deny = this.#deny;
    if (cmd !== 'c' || deny === undefined) return;
    if (deny.size > 0 && (d.allowed || ops.some((op) => op.rule.countRejected || op.rule.blockForMs > 0))) deny.written(keys);
    if (!d.allowed) deny.remember(signature(ops, keys), ops, keys, d, t !== undefined);
  }

  /** A stack failed (its run, or its deadline): the failure is published and the policy answers. */
  #fail(p: PendingStack, err: unknown): void {
    p.done = true;
    const cmd = p.cmd;
    // A settle that failed keeps the estimate (as one sent alone): published, not retried locally.
    this.#failed(err, p.leased ? 'refund' : OP_NAMES[cmd], cmd === 's' ? 'none' : this.onStoreError);
    p.resolve(cmd === 's' ? { allowed: true, now: p.now ?? Date.now(), outcomes: [] } : this.#degraded(cmd, p.ops, p.now));
  }

  #deadline<T>(p: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(timeoutError(this.timeoutMs)), this.timeoutMs);
      p.then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        (e: unknown) => {
          clearTimeout(timer);
          reject(e);
        },
      );
    });
  }

  async #degraded(cmd: Command, ops: readonly StoreOp[], now: number | undefined): Promise<StoreDecision> {
    const t = now ?? Date.now();
    if (this.onStoreError === 'allow') return allowAll(ops, t);
    if (this.onStoreError === 'deny') return denyAll(ops, t, Math.max(1, this.#breaker.retryInMs() || this.#breaker.cooldownMs));
    const local = this.#local.ops(ops);
    const d = cmd === 'p' ? await this.#local.store.peek(local, now) : await this.#local.store.consume(local, now);
    d.degraded = 'local';
    return d;
  }

  #failed(error: unknown, operation: StoreErrorEvent['operation'], policy: StoreErrorEvent['policy'], breaker = true): void {
    if (breaker) this.#breaker.failure();
    const event: StoreErrorEvent = { error, operation, policy, breaker: this.#breaker.state };
    if (this.listenerCount('error') > 0) this.#tell('error', event);
    if (redisChannels.error.hasSubscribers) redisChannels.error.publish({ store: this, ...event });
  }

  #breakerChanged(e: BreakerEvent): void {
    if (this.listenerCount('breaker') > 0) this.#tell('breaker', e);
    if (redisChannels.breaker.hasSubscribers) redisChannels.breaker.publish({ store: this, ...e });
  }

  /**
   * Calls each listener of `name` with `event`. They run inside a decision's path (a
   * breaker changes state on a reply): one that throws (or rejects) is counted and reported
   * once per store, and the others are still called, so an observer never changes or breaks
   * a decision (a throw there rejected it, and left a lease call's units counted for nobody).
   */
  #tell(name: 'error' | 'breaker', event: StoreErrorEvent | BreakerEvent): void {
    // rawListeners: a `once` listener's wrapper, which removes it when called.
    for (const listener of this.rawListeners(name)) {
      try {
        const r: unknown = Reflect.apply(listener, this, [event]);
        if (r instanceof Promise) r.catch((err: unknown) => this.#listenerFailed(name, err));
      } catch (err) {
        this.#listenerFailed(name, err);
      }
    }
  }

  #listenerFailed(name: 'error' | 'breaker', err: unknown): void {
    if (++this.#listenerFailures > 1) return;
    const what = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    warn({
      store: this,
      code: 'TOLLGATE_REDIS_LISTENER_FAILED',
      message:
        `A RedisStore '${name}' listener threw (${what}): the store went on as if it had not; ` +
        'later failures are only counted (store.listenerFailures). Catch errors inside the listener.',
    });
  }
}
