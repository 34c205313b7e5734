/**
 * `RedisStore`: the store for many instances.
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
 * events (`'error'` only when someone listens, so nothing is ever thrown at the app) and
 * diagnostics-channel messages.
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
  unknownOptionFix,
} from '@tollgate/core';
import {
  type Command,
  decideArgs,
  keyOpArgs,
  leaseArgs,
  parseDecisions,
  parseKeyState,
  parseLease,
  refundArgs,
  type StackCall,
  settleArgs,
} from './args.js';
import { Breaker, type BreakerOptions, type BreakerState } from './breaker.js';
import { redisChannels } from './channels.js';
import { checkOnConnect } from './checks.js';
import { portOf, type RedisPort } from './client.js';
import { DenyCache } from './deny-cache.js';
import { clientError, closedError, optionError, timeoutError } from './errors.js';
import { allowAll, denyAll, LocalFallback, type StoreErrorPolicy } from './fallback.js';
import { redisKey, slotOf } from './keys.js';
import { type LeaseReply, Leases } from './lease/leases.js';
import { type LeaseOptions, leaseSettings } from './lease/options.js';
import { operatorCall } from './operator.js';
import { type RedisClientLike, runKeyOp, runnerOf, runScript, type ScriptRunner, STORE_CODE } from './script.js';

export interface RedisStoreOptions {
  /**
   * The client you built and connected: ioredis or iovalkey (`Redis`, Sentinel through
   * `new Redis({ sentinels, name })`, `Cluster`), or node-redis (`createClient`,
   * `createCluster`, `createSentinel`). Both are optional peer dependencies.
   */
  client: RedisClientLike;
  /**
   * Prepended to every Redis key (no braces).
   * @default ''
   * @example new RedisStore({ client, prefix: 'myapp:' })
   */
  prefix?: string;
  /**
   * Deadline of every Redis call in ms; past it the failure policy answers.
   * @default 100
   */
  timeoutMs?: number;
  /**
   * What decides when Redis cannot: let through, refuse (503), or a local in-memory
   * store of the same rules.
   * @default 'local'
   */
  onStoreError?: StoreErrorPolicy;
  /**
   * Expected number of instances: the `'local'` fallback divides every limit by it.
   * @default 1
   * @example new RedisStore({ client, instances: 4 }) // each instance keeps a quarter while Redis is down
   */
  instances?: number;
  /**
   * Time source when the limiter passes none: `'redis'` (the script's `TIME`) or a Clock.
   * A Clock is for tests: instances on Redis time and one on its own clock disagree about
   * every window. More than a second away from Redis `TIME` at connect, it gets a
   * `TOLLGATE_REDIS_CLOCK_SKEW` warning.
   * @default 'redis'
   */
  clock?: 'redis' | Clock;
  /**
   * Hash tag of a (rule, key), so that a stack shares one Cluster slot (one round trip).
   * Given the key as the rule's key function returned it (as text, before sanitising); the
   * tag returned is sanitised like a key.
   * @default the key itself: rules counting under the same key share a slot
   * @example hashTag: (_rule, key) => key.split(':')[0] // by tenant, for keys "tenant:user"
   */
  hashTag?: (ruleName: string, key: string) => string;
  /**
   * The local deny cache: a stack Redis rejected until T is rejected locally until T.
   * `false` turns it off; a number caps its entries.
   * @default true (10000 entries)
   */
  denyCache?: boolean | number;
  /**
   * Send the stacks requested in the same tick as one script run (standalone Redis only),
   * decided one after the other, each all-or-nothing.
   * @default true
   */
  batch?: boolean;
  /**
   * Least TTL, in ms, of a key written on supplied time (a `clock` here or on the limiter):
   * Redis expires keys on its own clock, which a supplied clock need not follow. An entry
   * past its expiry is read as absent whatever its TTL, so this only delays clean-up. On
   * Redis time TTLs are exact.
   * @default 1000
   */
  minTtlMs?: number;
  /**
   * Breaker settings: consecutive failures that open it, and the cool-down before a probe.
   * @default { failures: 3, cooldownMs: 1000 }
   */
  breaker?: BreakerOptions;
  /**
   * Leases: an instance takes up to `max` units of a (rule, key) from Redis in one atomic
   * call and decides locally from them for up to `ttl` (see docs/distributed.md, "Leases").
   * Lease sizes shrink as a key nears its limit, down to one request's cost.
   * @default off
   * @example new RedisStore({ client, lease: { max: 100, ttl: '1s' } })
   */
  lease?: LeaseOptions;
}

export interface StoreErrorEvent {
  error: unknown;
  operation: 'consume' | 'peek' | 'refund' | 'settle' | 'reset';
  /** What answered instead: the policy, or `'none'` for refund and reset. */
  policy: StoreErrorPolicy | 'none';
  breaker: BreakerState;
}

export interface BreakerEvent {
  from: BreakerState;
  to: BreakerState;
  failures: number;
}

const KNOWN = new Set([
  'client',
  'prefix',
  'timeoutMs',
  'onStoreError',
  'instances',
  'clock',
  'hashTag',
  'denyCache',
  'breaker',
  'minTtlMs',
  'batch',
  'lease',
]);
const POLICIES = new Set(['allow', 'deny', 'local']);
const OP_NAMES = { c: 'consume', p: 'peek', r: 'refund', s: 'settle' } as const;
/** Multi-slot decisions remembered for their per-slot times (refunds need them). */
const GROUP_TIMES_MAX = 10_000;
/**
 * A number per compiled rule, for the deny cache's signature: rules of different limiters
 * may share a name, and so a Redis key, while their limits differ.
 */
const ruleIds = new WeakMap<RuleSpec, number>();
let nextRuleId = 0;
function ruleIdOf(r: RuleSpec): number {
  let id = ruleIds.get(r);
  if (id === undefined) {
    id = nextRuleId++;
    ruleIds.set(r, id);
  }
  return id;
}

/** Most ops decided by one batched script run. */
const BATCH_MAX_OPS = 256;

/** A stack waiting for its batch's script run (it is the batch's `StackCall` itself). */
interface PendingStack extends StackCall {
  readonly keys: readonly string[];
  /** Settles the decision: Redis' answer, or the failure policy's. */
  readonly resolve: (d: StoreDecision | Promise<StoreDecision>) => void;
  /** Whether it was answered (by Redis, or by the policy after a failure or the deadline). */
  done: boolean;
}

/** One batched script run: its stacks, and its deadline (performance.now() time). */
interface BatchRun {
  readonly stacks: readonly PendingStack[];
  readonly deadline: number;
  /** Neither answered nor past its deadline yet. */
  open: boolean;
}

/**
 * The deny cache's signature of a stack: its keys, rules and costs. A cached rejection
 * answers only the same rules (not just the same keys) at the same costs.
 */
function signature(ops: readonly StoreOp[], keys: readonly string[]): string {
  let sig = keys.join('\n');
  for (const op of ops) sig += ` ${ruleIdOf(op.rule)}:${op.cost}`;
  return sig;
}

function validate(o: RedisStoreOptions): void {
  if (typeof o !== 'object' || o === null)
    throw optionError('RedisStore', 'an options object { client, ... }', o, 'Pass { client: new Redis() }.');
  for (const k of Object.keys(o)) {
    if (!KNOWN.has(k)) throw optionError(`RedisStore.${k}`, [...KNOWN].join(', '), k, unknownOptionFix(k, KNOWN), 'TG_UNKNOWN_OPTION');
  }
  if (portOf(o.client) === undefined) throw clientError('RedisStore', o.client);
  if (o.prefix !== undefined && (typeof o.prefix !== 'string' || /[{}\s]/.test(o.prefix) || o.prefix.length > 64)) {
    throw optionError(
      'RedisStore.prefix',
      'up to 64 characters without braces or spaces',
      o.prefix,
      'Use a short namespace such as "myapp:".',
    );
  }
  if (o.timeoutMs !== undefined && !(typeof o.timeoutMs === 'number' && o.timeoutMs > 0 && o.timeoutMs <= 2_147_483_647)) {
    throw optionError(
      'RedisStore.timeoutMs',
      'a number of ms > 0',
      o.timeoutMs,
      'Use a deadline a little above your Redis p99 latency, e.g. 100.',
    );
  }
  if (o.onStoreError !== undefined && !POLICIES.has(o.onStoreError)) {
    throw optionError(
      'RedisStore.onStoreError',
      "'allow', 'deny' or 'local'",
      o.onStoreError,
      "Pick what answers while Redis is down; 'local' is the default.",
    );
  }
  if (o.instances !== undefined && !(Number.isSafeInteger(o.instances) && o.instances >= 1)) {
    throw optionError('RedisStore.instances', 'a whole number >= 1', o.instances, 'Set it to the number of instances sharing the limits.');
  }
  if (o.clock !== undefined && o.clock !== 'redis' && typeof (o.clock as Clock | null)?.now !== 'function') {
    throw optionError('RedisStore.clock', "'redis' or an object with now(): number", o.clock, 'Omit it to use Redis time.');
  }
  if (o.hashTag !== undefined && typeof o.hashTag !== 'function') {
    throw optionError(
      'RedisStore.hashTag',
      'a function (ruleName, key) => string',
      o.hashTag,
      'Return the part that should share a slot, e.g. the tenant.',
    );
  }
  if (o.batch !== undefined && typeof o.batch !== 'boolean') {
    throw optionError('RedisStore.batch', 'true or false', o.batch, 'Omit it to batch (the default).');
  }
  if (o.minTtlMs !== undefined && !(Number.isSafeInteger(o.minTtlMs) && o.minTtlMs >= 0)) {
    throw optionError('RedisStore.minTtlMs', 'a whole number of ms >= 0', o.minTtlMs, 'Omit it to keep the default (1000).');
  }
  const dc = o.denyCache;
  if (dc !== undefined && typeof dc !== 'boolean' && !(Number.isSafeInteger(dc) && (dc as number) > 0)) {
    throw optionError(
      'RedisStore.denyCache',
      'true, false or a positive number of entries',
      dc,
      'Omit it to keep the default (on, 10000 entries).',
    );
  }
  const b = o.breaker;
  if (b !== undefined) {
    if (typeof b !== 'object' || b === null)
      throw optionError('RedisStore.breaker', 'an object { failures?, cooldownMs? }', b, 'Omit it for the defaults.');
    for (const k of Object.keys(b)) {
      if (k !== 'failures' && k !== 'cooldownMs')
        throw optionError(
          `RedisStore.breaker.${k}`,
          'failures, cooldownMs',
          k,
          unknownOptionFix(k, ['failures', 'cooldownMs']),
          'TG_UNKNOWN_OPTION',
        );
    }
    if (b.failures !== undefined && !(Number.isSafeInteger(b.failures) && b.failures >= 1)) {
      throw optionError('RedisStore.breaker.failures', 'a whole number >= 1', b.failures, 'Use e.g. 3.');
    }
    if (b.cooldownMs !== undefined && !(typeof b.cooldownMs === 'number' && b.cooldownMs >= 0 && Number.isFinite(b.cooldownMs))) {
      throw optionError('RedisStore.breaker.cooldownMs', 'a number of ms >= 0', b.cooldownMs, 'Use e.g. 1000.');
    }
  }
}

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
  readonly #cluster: boolean;
  readonly #clock: Clock | undefined;
  readonly #hashTag: ((ruleName: string, key: string) => string) | undefined;
  readonly #breaker: Breaker;
  readonly #deny: DenyCache | undefined;
  readonly #local: LocalFallback;
  /** `${at}|${redis key}` → the time the op's slot decided at (multi-slot, Redis time). */
  readonly #groupTimes = new Map<string, number>();
  readonly #minTtl: string;
  /** Standalone Redis with `batch`: stacks asked in the same tick share one script run. */
  readonly #batching: boolean;
  /** Per rule, its last key and that key's Redis key (see keyOf). */
  readonly #lastKeys = new WeakMap<RuleSpec, { key: string; redisKey: string }>();
  /**
   * The stacks of this tick, `#pending[0..#pendingCount)`: one array for the store's life
   * (a new one per tick grew a backing store of 17 entries for the lone stack), each entry
   * cleared when its tick is sent.
   */
  readonly #pending: (PendingStack | undefined)[] = [];
  #pendingCount = 0;
  /** When the first stack of `#pending` was asked (performance.now()). */
  #pendingAt = 0;
  /** Batched runs whose deadline is watched, oldest first (see `#watch`). */
  readonly #runs: BatchRun[] = [];
  /** Runs of `#runs` not yet answered. */
  #inFlight = 0;
  /** The one deadline timer of the batched runs, armed for the oldest run's deadline. */
  #timer: ReturnType<typeof setTimeout> | undefined;
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

  constructor(options: RedisStoreOptions) {
    super();
    validate(options);
    const lease = options.lease === undefined ? undefined : leaseSettings(options.lease, options.instances ?? 1);
    this.client = options.client;
    this.#port = portOf(options.client) as RedisPort;
    this.#runner = runnerOf(this.#port);
    this.#cluster = this.#port.cluster;
    this.prefix = options.prefix ?? '';
    this.timeoutMs = options.timeoutMs ?? 100;
    this.onStoreError = options.onStoreError ?? 'local';
    this.#clock = options.clock === undefined || options.clock === 'redis' ? undefined : options.clock;
    this.#hashTag = options.hashTag;
    this.#minTtl = String(options.minTtlMs ?? 1000);
    this.#batching = (options.batch ?? true) && !this.#cluster;
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
    // --- lease hook: the store's machinery a lease goes through (lease/leases.ts) ---
    this.#leases =
      lease === undefined
        ? undefined
        : new Leases(lease, {
            keyOf: (rule, key, raw) => this.keyOf(rule, key, raw),
            time: (now) => this.#time(now),
            oneCall: (keys) => this.#groups(keys) === undefined,
            lease: (ops, keys, t, max, share) => this.#leaseCall(ops, keys, t, max, share),
            exact: (cmd, ops, now) => this.#decide(cmd, ops, now),
            giveBack: (ops, at, t) => this.#giveBack('refund', ops, at, t, true),
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

  /**
   * One lease call (lease hook): the deny cache, breaker, deadline and failure policy of a
   * decision, and grants only when Redis decided.
   */
  async #leaseCall(ops: readonly StoreOp[], keys: string[], t: number | undefined, max: number, share: number): Promise<LeaseReply> {
    const deny = this.#deny;
    if (deny !== undefined && deny.size > 0) {
      const hit = deny.get(signature(ops, keys), t);
      if (hit !== undefined) return { d: hit, grants: undefined };
    }
    if (!this.#breaker.tryCall()) return { d: await this.#degraded('c', ops, t), grants: undefined };
    let r: { d: StoreDecision; grants: number[] };
    try {
      r = parseLease(await this.#deadline(runScript(this.#port, leaseArgs(ops, keys, t, max, share, this.#minTtl))), ops.length);
    } catch (err) {
      this.#failed(err, 'consume', this.onStoreError);
      return { d: await this.#degraded('c', ops, t), grants: undefined };
    }
    this.#answered('c', ops, keys, t, r.d);
    return r;
  }

  /** The breaker's state: `'closed'` while Redis answers. */
  get breakerState(): BreakerState {
    return this.#breaker.state;
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

  refund(ops: readonly StoreOp[], at: number, now?: number): Promise<void> {
    // Units of a lease still live go back to it; the rest to Redis.
    if (this.#leases !== undefined && !this.#closed) {
      return this.#giveBack('refund', this.#leases.refund(ops, at, this.#time(now)), at, now);
    }
    return this.#giveBack('refund', ops, at, now);
  }

  /**
   * Settles a reservation (see `Store.settle`): one atomic call (per slot on a Cluster
   * whose keys span slots, as a refund), each op's cost the actual cost less the estimate.
   */
  settle(ops: readonly StoreOp[], at: number, now?: number): Promise<void> {
    // What a settle gives back of a decision from a live lease goes back to it.
    if (this.#leases !== undefined && !this.#closed) {
      return this.#giveBack('settle', this.#leases.settle(ops, at, this.#time(now)), at, now);
    }
    return this.#giveBack('settle', ops, at, now);
  }

  async #giveBack(operation: 'refund' | 'settle', ops: readonly StoreOp[], at: number, now?: number, lease = false): Promise<void> {
    if (this.#closed) throw closedError();
    if (ops.length === 0) return;
    // A lease's units going back change only their keys' answers.
    const keys = ops.map((op) => this.keyOf(op.rule, op.key, op.raw));
    if (lease) this.#deny?.written(keys);
    else this.#deny?.clear();
    const t = this.#time(now);
    checkTime(at, `RedisStore.${operation}: at`);
    if (!this.#breaker.tryCall()) {
      // Decisions are being made locally: give back (or charge) there.
      if (this.onStoreError === 'local') await this.#local.store[operation](this.#local.ops(ops), at, t);
      return;
    }
    if (operation === 'settle' && this.#batching) {
      // In the batch of this tick, in the same script run as the decisions asked with it.
      const keys = ops.map((op) => this.keyOf(op.rule, op.key, op.raw));
      await new Promise<StoreDecision>((resolve) => this.#enqueue({ cmd: 's', ops, now: t, at, keys, resolve, done: false }));
      return;
    }
    try {
      await this.#deadline(this.#refundRemote(operation === 'refund' ? refundArgs : settleArgs, ops, keys, at, t));
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
    await this.#leases?.forget(rule, key, raw, false);
    await this.#local.store.reset(rule, key);
    const k = this.keyOf(rule, key, raw);
    try {
      await operatorCall(() => this.#port.command(['DEL', k], k), 'reset', this.timeoutMs);
    } catch (err) {
      this.#failed(err, 'reset', 'none', false);
      throw err;
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
    // A change ends this instance's lease of the key first: its units go back before it.
    if (op.kind !== 'get') await this.#leases?.forget(rule, key, raw, true);
    const k = this.keyOf(rule, key, raw);
    const keys = op.kind !== 'get' && op.id !== undefined ? [k, `${k} op ${op.id}`] : [k];
    const args = keyOpArgs(rule, op, t, this.#minTtl);
    const reply = await operatorCall(() => runKeyOp(this.#port, keys, args), op.kind, this.timeoutMs, op.kind === 'get');
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
    if (this.#inFlight === 0) {
      // Nothing left to watch (runs still in flight keep theirs until answered or expired).
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#runs.length = 0;
    }
    this.#deny?.clear();
    this.#groupTimes.clear();
    await this.#local.store.close();
  }

  /**
   * Not async: on the batched path a decision is one promise, settled from its batch's
   * reply (see `#flush`). Anything thrown before Redis is asked rejects it, as before.
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
      if (!this.#batching) return this.#decideRemote(cmd, ops, keys, t);
      return new Promise<StoreDecision>((resolve) => {
        this.#enqueue({ cmd, ops, now: t, keys, resolve, done: false });
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** One stack's script run (Cluster, or `batch: false`) under its own deadline. */
  async #decideRemote(cmd: 'c' | 'p', ops: readonly StoreOp[], keys: string[], t: number | undefined): Promise<StoreDecision> {
    try {
      const d = await this.#deadline(this.#remote(cmd, ops, keys, t));
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

  /** Decides `ops` in Redis: one script per slot group. */
  async #remote(cmd: 'c' | 'p', ops: readonly StoreOp[], keys: string[], now: number | undefined): Promise<StoreDecision> {
    const groups = this.#groups(keys);
    if (groups === undefined) return this.#oneRun({ cmd, ops, now }, keys);
    const parts = await Promise.all(
      groups.map(async (idx) => {
        const gops = idx.map((i) => ops[i] as StoreOp);
        const reply = await runScript(
          this.#port,
          decideArgs(
            [{ cmd, ops: gops, now }],
            idx.map((i) => keys[i] as string),
            this.#minTtl,
          ),
        );
        return parseDecisions(reply, [gops.length])[0] as StoreDecision;
      }),
    );
    const outcomes: StoreDecision['outcomes'] = new Array(ops.length);
    let allowed = true;
    for (const [g, idx] of groups.entries()) {
      const part = parts[g] as StoreDecision;
      if (!part.allowed) allowed = false;
      idx.forEach((i, j) => {
        outcomes[i] = part.outcomes[j] as StoreDecision['outcomes'][number];
      });
    }
    const first = parts[0] as StoreDecision;
    if (!allowed) {
      // The slots that admitted: a consume's gave what they admitted back (reserve-then-refund).
      // Their admitting rules then report the state as found, as on one slot: the cost back
      // in `remaining`, and `resetMs` read again at the slot's decision time at cost 0 (a
      // check of cost 0 is the state's own), not the admission's.
      await Promise.all(
        groups.map(async (idx, g) => {
          const part = parts[g] as StoreDecision;
          if (!part.allowed) return;
          const back = idx.filter((_, j) => (part.outcomes[j] as StoreDecision['outcomes'][number]).allowed);
          if (back.length === 0) return;
          const backOps = back.map((i) => ops[i] as StoreOp);
          const backKeys = back.map((i) => keys[i] as string);
          if (cmd === 'c') await runScript(this.#port, refundArgs(backOps, backKeys, now, part.now, this.#minTtl));
          const unchanged = backOps.map((op) => ({ ...op, cost: 0 }));
          const reply = await runScript(this.#port, decideArgs([{ cmd: 'p', ops: unchanged, now: part.now }], backKeys, this.#minTtl));
          const found = parseDecisions(reply, [back.length])[0] as StoreDecision;
          back.forEach((i, j) => {
            const o = outcomes[i] as StoreDecision['outcomes'][number];
            o.remaining += (ops[i] as StoreOp).cost;
            o.resetMs = (found.outcomes[j] as StoreDecision['outcomes'][number]).resetMs;
          });
        }),
      );
      for (const o of outcomes) o.delayMs = 0;
    } else if (cmd === 'c' && now === undefined) {
      // Each slot decided at its own node's TIME; a later refund must name those times.
      for (const [g, idx] of groups.entries()) {
        const part = parts[g] as StoreDecision;
        if (part.now !== first.now) for (const i of idx) this.#rememberTime(`${first.now}|${keys[i]}`, part.now);
        else if (this.#groupTimes.size > 0) {
          // An earlier decision in the same millisecond may have left a time for these keys;
          // this decision's slots agreed, so a refund of it must not pick that time up.
          for (const i of idx) this.#groupTimes.delete(`${first.now}|${keys[i]}`);
        }
      }
    }
    return { allowed, now: first.now, outcomes };
  }

  /**
   * Decides one stack whose keys share a slot, in its own script run: on a Cluster (its
   * stacks would span slots) or with `batch: false`. Batched stacks go through `#enqueue`.
   */
  #oneRun(call: StackCall, keys: readonly string[]): Promise<StoreDecision> {
    return runScript(this.#port, decideArgs([call], keys, this.#minTtl)).then(
      (r) => parseDecisions(r, [call.ops.length])[0] as StoreDecision,
    );
  }

  /**
   * Queues a stack for the batch of this tick. Stacks requested in the same tick are sent
   * together, as one script run that decides them one after the other (each still
   * all-or-nothing): the per-call cost of a script run is paid once per batch, which is
   * what many requests in flight need. The tick's stacks share one deadline, `timeoutMs`
   * after the first of them was asked (see `#watch`).
   */
  #enqueue(p: PendingStack): void {
    this.#pending[this.#pendingCount++] = p;
    if (this.#pendingCount === 1) {
      this.#pendingAt = performance.now();
      process.nextTick(this.#flush);
    }
  }

  /**
   * Watches a script run's deadline. One timer serves every run in flight, oldest first
   * (runs are sent in the order they were asked, and all have the same `timeoutMs`): it
   * is armed for the oldest deadline and, when it fires, fails what is past its deadline
   * and is armed again for the next. A run answered in time costs no timer of its own, so
   * a request alone in its tick (the common case over HTTP) arms and clears nothing; while
   * no run is in flight the timer holds no reference that keeps the process alive.
   */
  #watch(run: BatchRun): void {
    this.#runs.push(run);
    if (this.#inFlight++ === 0) this.#timer?.ref();
    if (this.#timer === undefined) this.#timer = setTimeout(this.#expire, Math.max(1, run.deadline - performance.now()));
  }

  /** A run was answered (or failed) before its deadline. */
  #settle(run: BatchRun): void {
    run.open = false;
    // Runs are answered in the order they were sent: the answered ones at the head leave the
    // queue now, so it holds about what is in flight (not every run since the timer fired).
    const runs = this.#runs;
    while (runs.length > 0 && !(runs[0] as BatchRun).open) runs.shift();
    if (--this.#inFlight === 0) this.#timer?.unref();
  }

  /** The deadline timer: every stack of a run past its deadline fails with a timeout. */
  readonly #expire = (): void => {
    this.#timer = undefined;
    const runs = this.#runs;
    const now = performance.now();
    let err: unknown;
    while (runs.length > 0) {
      const run = runs[0] as BatchRun;
      // Timers fire on whole milliseconds: a deadline less than 1 ms away is due.
      if (run.deadline - now >= 1) break;
      // Settling takes it (and the answered runs behind it) off the queue.
      this.#settle(run);
      err ??= timeoutError(this.timeoutMs);
      for (const p of run.stacks) if (!p.done) this.#fail(p, err);
    }
    if (runs.length > 0) {
      this.#timer = setTimeout(this.#expire, Math.max(1, (runs[0] as BatchRun).deadline - now));
      if (this.#inFlight === 0) this.#timer.unref();
    }
  };

  /**
   * A stack failed (its run, or its deadline): the failure is published and the policy
   * answers. An `'error'` or `'breaker'` listener that throws rejects this decision with
   * its error, as an unbatched call does, and leaves the rest of the batch to be answered.
   */
  #fail(p: PendingStack, err: unknown): void {
    p.done = true;
    const cmd = p.cmd;
    try {
      // A settle that failed keeps the estimate (as one sent alone): published, not retried locally.
      this.#failed(err, OP_NAMES[cmd], cmd === 's' ? 'none' : this.onStoreError);
    } catch (listenerError) {
      p.resolve(Promise.reject(listenerError));
      return;
    }
    p.resolve(cmd === 's' ? { allowed: true, now: p.now ?? Date.now(), outcomes: [] } : this.#degraded(cmd, p.ops, p.now));
  }

  readonly #flush = (): void => {
    const pending = this.#pending;
    const n = this.#pendingCount;
    this.#pendingCount = 0;
    const deadline = this.#pendingAt + this.timeoutMs;
    if (n === 1) {
      // Alone in its tick: its own keys and size, nothing gathered.
      const p = pending[0] as PendingStack;
      pending[0] = undefined;
      this.#send([p], p.keys, [p.cmd === 's' ? -1 : p.ops.length], deadline);
      return;
    }
    const all = pending.slice(0, n) as PendingStack[];
    // A burst's array is not kept at its size; a usual one is kept, emptied.
    if (n > BATCH_MAX_OPS) pending.length = 0;
    else pending.fill(undefined, 0, n);
    for (let from = 0; from < all.length; ) {
      // Bounded batches keep one script run short (Redis runs scripts one at a time).
      let to = from;
      let ops = 0;
      const sizes: number[] = [];
      const keys: string[] = [];
      while (to < all.length && (to === from || ops + (all[to] as PendingStack).ops.length <= BATCH_MAX_OPS)) {
        const p = all[to] as PendingStack;
        ops += p.ops.length;
        sizes.push(p.cmd === 's' ? 0 : p.ops.length);
        for (const k of p.keys) keys.push(k);
        to++;
      }
      this.#send(from === 0 && to === all.length ? all : all.slice(from, to), keys, sizes, deadline);
      from = to;
    }
  };

  /**
   * Sends one batched script run and settles its stacks from the reply. `sizes[j]`: stack
   * j's op count in the reply (a settle has none); `[-1]`, a settle alone, sent as one.
   */
  #send(batch: readonly PendingStack[], keys: readonly string[], sizes: readonly number[], deadline: number): void {
    let reply: Promise<unknown>;
    try {
      const lone = sizes[0] === -1 ? (batch[0] as PendingStack) : undefined;
      const call =
        lone === undefined ? decideArgs(batch, keys, this.#minTtl) : settleArgs(lone.ops, keys, lone.now, lone.at as number, this.#minTtl);
      reply = this.#runner.call(STORE_CODE, call.keys, call.args);
    } catch (err) {
      // Thrown before Redis was asked (a client that throws instead of rejecting): this
      // run's stacks fail now; the tick's other runs go on.
      for (const p of batch) if (!p.done) this.#fail(p, err);
      return;
    }
    const run: BatchRun = { stacks: batch, deadline, open: true };
    this.#watch(run);
    reply.then(
      (r) => this.#answer(run, r, sizes),
      (err: unknown) => {
        if (run.open) this.#settle(run);
        for (const p of batch) if (!p.done) this.#fail(p, err);
      },
    );
  }

  /** A batched run's reply: each stack not yet answered (by its deadline) gets its decision. */
  #answer(run: BatchRun, reply: unknown, sizes: readonly number[]): void {
    if (run.open) this.#settle(run);
    const batch = run.stacks;
    let ds: StoreDecision[];
    try {
      ds = sizes[0] === -1 ? [{ allowed: true, now: 0, outcomes: [] }] : parseDecisions(reply, sizes);
    } catch (err) {
      for (const p of batch) if (!p.done) this.#fail(p, err);
      return;
    }
    for (let j = 0; j < batch.length; j++) {
      const p = batch[j] as PendingStack;
      if (p.done) continue; // past the deadline: the policy answered
      p.done = true;
      const d = ds[j] as StoreDecision;
      try {
        if (p.cmd === 's') this.#breaker.success();
        else this.#answered(p.cmd, p.ops, p.keys, p.now, d);
      } catch (listenerError) {
        // A 'breaker' listener threw: this decision rejects with its error.
        p.resolve(Promise.reject(listenerError));
        continue;
      }
      p.resolve(d);
    }
  }

  async #refundRemote(
    argsOf: typeof refundArgs,
    ops: readonly StoreOp[],
    keys: string[],
    at: number,
    now: number | undefined,
  ): Promise<void> {
    const groups = this.#groups(keys);
    if (groups === undefined) {
      await runScript(this.#port, argsOf(ops, keys, now, at, this.#minTtl));
      return;
    }
    await Promise.all(
      groups.map((idx) => {
        const k = idx.map((i) => keys[i] as string);
        const groupAt = this.#groupTimes.get(`${at}|${k[0]}`) ?? at;
        return runScript(
          this.#port,
          argsOf(
            idx.map((i) => ops[i] as StoreOp),
            k,
            now,
            groupAt,
            this.#minTtl,
          ),
        );
      }),
    );
  }

  #rememberTime(id: string, t: number): void {
    if (this.#groupTimes.size >= GROUP_TIMES_MAX) {
      const oldest = this.#groupTimes.keys().next();
      if (!oldest.done) this.#groupTimes.delete(oldest.value);
    }
    this.#groupTimes.set(id, t);
  }

  /** Op indices grouped by Cluster slot, or undefined when one script can take them all. */
  #groups(keys: readonly string[]): number[][] | undefined {
    if (!this.#cluster || keys.length < 2) return undefined;
    const bySlot = new Map<number, number[]>();
    for (let i = 0; i < keys.length; i++) {
      const s = slotOf(keys[i] as string);
      const g = bySlot.get(s);
      if (g) g.push(i);
      else bySlot.set(s, [i]);
    }
    return bySlot.size === 1 ? undefined : [...bySlot.values()];
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
    if (this.listenerCount('error') > 0) this.emit('error', event);
    if (redisChannels.error.hasSubscribers) redisChannels.error.publish({ store: this, ...event });
  }

  #breakerChanged(e: BreakerEvent): void {
    this.emit('breaker', e);
    if (redisChannels.breaker.hasSubscribers) redisChannels.breaker.publish({ store: this, ...e });
  }
}
