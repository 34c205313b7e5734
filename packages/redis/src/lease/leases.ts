/**
 * Leases: units of a (rule, key) consumed in Redis ahead of use, in one atomic call, then
 * spent locally at memory speed until they run out or `ttl` passes.
 *
 * A lease call is the request's own decision with larger costs: per rule the server grants
 * `min(max, left / share)` units when a request of that cost would be admitted now, else the
 * request's cost (lua/lease.lua); so a refused call is exactly the request's refusal, and
 * near a limit leases shrink to one request's cost (an exact call). A key without recent
 * demand here leases nothing: it is decided exactly, in its tick's batch. A stack is
 * admitted from leases only when every rule holds a live lease covering its cost (all or
 * nothing); otherwise the rules without one go to Redis in one call, and the others' units
 * are put back if it refuses.
 *
 * Units not used go back (the store's refund, at the lease's time) when a lease is found
 * expired, by one unref'd sweep timer, on `close()`, and before an operation by key on this
 * instance. Leases are kept per Redis key; a decision under another rule object (an
 * `update`, another tier's limit) ends the key's lease first.
 */
import type { Outcome, RuleSpec, StoreDecision, StoreOp } from '@tollgate/core';
import { type LeaseSettings, ttlProblem } from './options.js';

/** What a lease call answers: the decision, and each op's grant when Redis decided it. */
export interface LeaseReply {
  readonly d: StoreDecision;
  /** Units each op consumed in Redis; undefined when the deny cache or the failure policy answered. */
  readonly grants: readonly number[] | undefined;
}

/** The store's machinery the leases use (redis-store.ts). */
export interface LeaseHost {
  keyOf(rule: RuleSpec, key: string, raw?: string): string;
  /** Supplied time checked (given, or the store's clock); undefined for Redis time. */
  time(now: number | undefined): number | undefined;
  /** Whether one script call can take these keys (one Cluster slot). */
  oneCall(keys: readonly string[]): boolean;
  /** A lease call for `ops`, with the deny cache, breaker, deadline and failure policy. */
  lease(ops: readonly StoreOp[], keys: string[], t: number | undefined, most: number): Promise<LeaseReply>;
  /** The store's exact decision (no lease). */
  exact(cmd: 'c' | 'p', ops: readonly StoreOp[], now: number | undefined): Promise<StoreDecision>;
  /** Gives units back in Redis, as a refund of a decision made at `at`; never rejects. */
  giveBack(ops: readonly StoreOp[], at: number, t: number | undefined): Promise<void>;
}

interface Lease {
  readonly rule: RuleSpec;
  readonly key: string;
  readonly raw: string | undefined;
  /** The time Redis counted the units at (Redis time, or the supplied time). */
  readonly at: number;
  /** Whether `at` is supplied time. */
  readonly given: boolean;
  /** Date.now() when the call was sent: before Redis counted the units. */
  readonly localAt: number;
  /** How long it may be used: `ttl`, or less (a fixed window's end). */
  readonly span: number;
  readonly granted: number;
  left: number;
  /** Units decided from it (less those given back to it): the next lease's size follows. */
  used: number;
  /** Redis' figures right after the lease: remaining then, and resetMs. */
  readonly remaining: number;
  readonly resetMs: number;
  /** Ended: its unused units were given back (or are being). */
  dead: boolean;
}

/** A rule leases unless it delays (a leaky queue) or only observes (dry run). */
function leasable(rule: RuleSpec): boolean {
  return !(rule.algorithm === 'leaky-bucket' && rule.mode === 'queue') && !rule.dryRun;
}

export class Leases {
  readonly settings: LeaseSettings;
  readonly #host: LeaseHost;
  /** Live leases by Redis key. */
  readonly #table = new Map<string, Lease>();
  /** Lease calls in flight by Redis key: a decision on such a key waits for it once. */
  readonly #pending = new Map<string, Promise<void>>();
  /** Rules checked against `ttl`: true when they lease. */
  readonly #rules = new WeakMap<RuleSpec, boolean>();
  /** The last supplied time seen: a sweep gives back supplied-time leases at it. */
  #lastGiven = Number.NEGATIVE_INFINITY;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** Keys under an operation by key on this instance (with how many): decided exactly meanwhile. */
  readonly #fenced = new Map<string, number>();
  /** The store is closing: no lease is taken, and those whose call was in flight go back with the rest. */
  #closing = false;
  /** The answer `local` reuses for the engine (see consumeLocal). */
  readonly #oneOutcome: Outcome = { allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0, delayMs: 0, reason: undefined };
  readonly #one: StoreDecision = { allowed: true, now: 0, outcomes: [this.#oneOutcome] };

  constructor(settings: LeaseSettings, host: LeaseHost) {
    this.settings = settings;
    this.#host = host;
  }

  /** Live leases (for tests and diagnostics). */
  get size(): number {
    return this.#table.size;
  }

  /** Unused units this instance holds for a Redis key (0 when none live). */
  held(redisKey: string): number {
    const l = this.#table.get(redisKey);
    return l === undefined || l.dead ? 0 : l.left;
  }

  /** Whether `rule` leases; throws the configuration error of a `ttl` too long for it. */
  #leases(rule: RuleSpec): boolean {
    let ok = this.#rules.get(rule);
    if (ok === undefined) {
      const problem = ttlProblem(rule, this.settings.ttlMs);
      if (problem !== undefined) throw problem;
      ok = leasable(rule);
      this.#rules.set(rule, ok);
    }
    return ok;
  }

  #live(l: Lease, t: number | undefined): boolean {
    return liveAt(l, t, Date.now());
  }

  /**
   * The decision when every rule holds a live lease covering its cost (taken from them),
   * else undefined: memory speed, no promise. `t` is the supplied time (checked), or
   * undefined on Redis time.
   */
  local(ops: readonly StoreOp[], t: number | undefined, reuse = false): StoreDecision | undefined {
    if (t !== undefined && t > this.#lastGiven) this.#lastGiven = t;
    const host = this.#host;
    const table = this.#table;
    if (ops.length === 1) {
      const op = ops[0] as StoreOp;
      const l = table.get(host.keyOf(op.rule, op.key, op.raw));
      if (l === undefined || l.rule !== op.rule || l.left < op.cost) return undefined;
      const p = Date.now();
      if (!liveAt(l, t, p)) return undefined;
      l.left -= op.cost;
      l.used += op.cost;
      const at = t ?? l.at + (p - l.localAt);
      if (!reuse) return { allowed: true, now: at, outcomes: [outcomeOf(l, at)] };
      // Read at once by the engine (consumeLocal): one object for every such answer.
      const d = this.#one;
      const o = this.#oneOutcome;
      d.now = at;
      o.remaining = l.remaining + l.left;
      o.resetMs = Math.max(0, l.resetMs - (at - l.at));
      return d;
    }
    if (ops.length === 0) return undefined;
    const p = Date.now();
    const found: Lease[] = [];
    for (const op of ops) {
      const l = table.get(host.keyOf(op.rule, op.key, op.raw));
      // A key twice in the stack (rules sharing a group) is not taken from twice: decided by the call.
      if (l === undefined || l.rule !== op.rule || l.left < op.cost || !liveAt(l, t, p) || found.includes(l)) return undefined;
      found.push(l);
    }
    const first = found[0] as Lease;
    const at = t ?? first.at + (p - first.localAt);
    const outcomes: Outcome[] = new Array(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const l = found[i] as Lease;
      l.left -= (ops[i] as StoreOp).cost;
      l.used += (ops[i] as StoreOp).cost;
      outcomes[i] = outcomeOf(l, t ?? l.at + (p - l.localAt));
    }
    return { allowed: true, now: at, outcomes };
  }

  consume(ops: readonly StoreOp[], now: number | undefined): Promise<StoreDecision> {
    try {
      const t = this.#host.time(now);
      const d = this.local(ops, t);
      if (d !== undefined) return Promise.resolve(d);
      const n = ops.length;
      if (n === 0 || this.#closing) return this.#host.exact('c', ops, now);
      const keys: string[] = new Array(n);
      let all = true;
      for (let i = 0; i < n; i++) {
        const op = ops[i] as StoreOp;
        if (!this.#leases(op.rule)) all = false;
        keys[i] = this.#host.keyOf(op.rule, op.key, op.raw);
      }
      // A stack leases only as a whole, in one call: distinct keys in one slot.
      if (!all || !distinct(keys) || !this.#host.oneCall(keys)) return this.#host.exact('c', ops, now);
      return this.#call(ops, keys, t);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** A stack not covered by leases alone: what leases cover is taken, the rest leased in one call. */
  async #call(ops: readonly StoreOp[], keys: string[], t: number | undefined): Promise<StoreDecision> {
    const n = ops.length;
    // A lease call in flight for one of these keys (a burst in one tick): wait for it rather
    // than lease again; after it, what its lease covers is taken, and the first waiter it
    // does not cover leases next (a size twice what the key used), the others wait for that.
    for (;;) {
      const wait: Promise<void>[] = [];
      for (const k of keys) {
        const p = this.#pending.get(k);
        if (p !== undefined) wait.push(p);
      }
      if (wait.length === 0) break;
      await Promise.all(wait);
      const d = this.local(ops, t);
      if (d !== undefined) return d;
    }
    if (this.#closing || (this.#fenced.size > 0 && keys.some((k) => this.#fenced.has(k)))) return this.#host.exact('c', ops, t);
    const taken: (Lease | undefined)[] = new Array(n);
    const need: number[] = [];
    // A lease's size follows the demand this instance saw: twice what the key's last lease
    // decided (at least 2, at most max), and none (an exact decision) for a key without one
    // in the table, or whose entry ended having decided one request (its entry stays, even
    // used up or expired, until the sweep after it ends). So a key seen once per ttl or less
    // (a flood of one-off keys) costs an exact decision, not a lease and a give-back, and a
    // quiet key holds few units unused.
    let most = this.settings.max;
    for (let i = 0; i < n; i++) {
      const op = ops[i] as StoreOp;
      const k = keys[i] as string;
      const l = this.#table.get(k);
      if (l !== undefined && l.rule === op.rule && l.left >= op.cost && this.#live(l, t)) {
        l.left -= op.cost;
        l.used += op.cost;
        taken[i] = l;
      } else {
        const once = l === undefined || l.rule !== op.rule || (l.used <= op.cost && !this.#live(l, t));
        most = once ? 0 : Math.min(most, Math.max(2, 2 * l.used));
        if (l !== undefined) this.#end(k, l);
        need.push(i);
      }
    }
    if (need.length === 0) {
      const at = timeIn(taken[0] as Lease, t);
      return { allowed: true, now: at, outcomes: taken.map((l) => outcomeOf(l as Lease, at)) };
    }
    const subOps = need.length === n ? ops : need.map((i) => ops[i] as StoreOp);
    const subKeys = need.length === n ? keys : need.map((i) => keys[i] as string);
    const localAt = Date.now();
    let done!: () => void;
    const pending = new Promise<void>((resolve) => {
      done = resolve;
    });
    // Exact decisions are not waited for: a tick's decisions on a new key share its batch.
    if (most > 0) for (const k of subKeys) this.#pending.set(k, pending);
    let reply: LeaseReply;
    try {
      reply = most > 0 ? await this.#host.lease(subOps, subKeys, t, most) : await this.#exact(subOps, t);
    } catch (err) {
      this.#putBack(ops, taken);
      throw err;
    } finally {
      for (const k of subKeys) if (this.#pending.get(k) === pending) this.#pending.delete(k);
      done();
    }
    const d = reply.d;
    const outcomes: Outcome[] = new Array(n);
    const grants = reply.grants;
    for (let j = 0; j < need.length; j++) {
      const i = need[j] as number;
      const o = d.outcomes[j] as Outcome;
      outcomes[i] = o;
      if (!d.allowed || grants === undefined) continue;
      const op = ops[i] as StoreOp;
      const grant = grants[j] as number;
      const left = grant - op.cost;
      o.remaining += left;
      this.#install(keys[i] as string, {
        rule: op.rule,
        key: op.key,
        raw: op.raw,
        at: d.now,
        given: t !== undefined,
        localAt,
        span: spanOf(op.rule, this.settings.ttlMs, d.now, o.resetMs),
        granted: grant,
        left,
        used: op.cost,
        remaining: o.remaining - left,
        resetMs: o.resetMs,
        dead: false,
      });
    }
    if (!d.allowed) this.#putBack(ops, taken);
    for (let i = 0; i < n; i++) {
      const l = taken[i];
      if (l === undefined) continue;
      // In a refused stack the lease's rule is reported untouched (its units were put back).
      outcomes[i] = outcomeOf(l, d.now);
    }
    const out: StoreDecision = { allowed: d.allowed, now: d.now, outcomes };
    if (d.degraded !== undefined) out.degraded = d.degraded;
    return out;
  }

  /** A decision leasing nothing, batched as exact ones are; as granting each op its cost when Redis decided (its entry records demand). */
  async #exact(ops: readonly StoreOp[], t: number | undefined): Promise<LeaseReply> {
    const d = await this.#host.exact('c', ops, t);
    return { d, grants: d.degraded === undefined ? ops.map((op) => op.cost) : undefined };
  }

  #install(k: string, l: Lease): void {
    const old = this.#table.get(k);
    if (old !== undefined && !old.dead && old.rule === l.rule && old.given === l.given && fresh(old, Date.now())) {
      // Decided meanwhile in the same span (a tick's exact decisions of one key): one entry, their demand summed.
      if (l.left === 0) {
        old.used += l.used;
        return;
      }
      // Another call leased this key meanwhile: one lease per key, the newer goes back.
      if (old.left > 0) {
        this.#giveBack(l);
        return;
      }
    }
    if (old !== undefined) this.#end(k, old);
    this.#table.set(k, l);
    // Closing: close() gives it back with the rest once the calls in flight are answered.
    if (this.#timer === undefined && !this.#closing) {
      // One sweep for every lease, not a timer per key.
      this.#timer = setInterval(this.#sweep, this.settings.ttlMs);
      this.#timer.unref();
    }
  }

  /** Units taken for a stack that was refused go back where they came from. */
  #putBack(ops: readonly StoreOp[], taken: readonly (Lease | undefined)[]): void {
    for (let i = 0; i < taken.length; i++) {
      const l = taken[i];
      if (l === undefined) continue;
      const cost = (ops[i] as StoreOp).cost;
      l.used -= cost;
      if (!l.dead) l.left += cost;
      else void this.#host.giveBack([opOf(l, cost)], l.at, this.#timeOf(l));
    }
  }

  /** Ends a lease: it leaves the table and its unused units go back to Redis. */
  #end(k: string, l: Lease): void {
    if (this.#table.get(k) === l) this.#table.delete(k);
    this.#giveBack(l);
  }

  #giveBack(l: Lease): Promise<void> {
    if (l.dead) return Promise.resolve();
    l.dead = true;
    if (l.left <= 0) return Promise.resolve();
    const cost = l.left;
    l.left = 0;
    return this.#host.giveBack([opOf(l, cost)], l.at, this.#timeOf(l));
  }

  /** The time a give-back runs at: Redis time, or the latest supplied time seen. */
  #timeOf(l: Lease): number | undefined {
    return l.given ? Math.max(l.at, this.#lastGiven) : undefined;
  }

  readonly #sweep = (): void => {
    const t = this.#lastGiven === Number.NEGATIVE_INFINITY ? undefined : this.#lastGiven;
    for (const [k, l] of this.#table) {
      if (l.dead || !this.#live(l, l.given ? t : undefined)) this.#end(k, l);
    }
    if (this.#table.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  };

  /**
   * A refund of a decision made at `at`: the units of a decision made during a lease still
   * live (while a key's lease is live its decisions are that lease's) go back to it: they
   * stay counted in Redis and are used within its ttl. The rest go to Redis.
   */
  refund(ops: readonly StoreOp[], at: number, t: number | undefined): StoreOp[] {
    const rest: StoreOp[] = [];
    for (const op of ops) if (!this.#takeBack(op, op.cost, at, t)) rest.push(op);
    return rest;
  }

  /** A settle: what it gives back (a cost below zero) goes to a live lease as a refund does; the rest to Redis. */
  settle(ops: readonly StoreOp[], at: number, t: number | undefined): StoreOp[] {
    const rest: StoreOp[] = [];
    for (const op of ops) if (!(op.cost < 0 && this.#takeBack(op, -op.cost, at, t))) rest.push(op);
    return rest;
  }

  #takeBack(op: StoreOp, units: number, at: number, t: number | undefined): boolean {
    const l = this.#table.get(this.#host.keyOf(op.rule, op.key, op.raw));
    if (l === undefined || l.dead || at < l.at || l.rule !== op.rule || !this.#live(l, t) || l.left + units > l.granted) return false;
    l.left += units;
    l.used -= units;
    return true;
  }

  /** A peek: answered locally when every rule's lease covers it; else Redis', with held units added. */
  async peek(ops: readonly StoreOp[], now: number | undefined): Promise<StoreDecision> {
    const t = this.#host.time(now);
    const found: (Lease | undefined)[] = ops.map((op) => {
      const l = this.#table.get(this.#host.keyOf(op.rule, op.key, op.raw));
      return l !== undefined && !l.dead && l.rule === op.rule && this.#live(l, t) ? l : undefined;
    });
    if (ops.length > 0 && found.every((l, i) => l !== undefined && l.left >= (ops[i] as StoreOp).cost)) {
      const at = timeIn(found[0] as Lease, t);
      return {
        allowed: true,
        now: at,
        outcomes: found.map((l, i) => {
          const o = outcomeOf(l as Lease, at);
          o.remaining -= (ops[i] as StoreOp).cost;
          return o;
        }),
      };
    }
    const d = await this.#host.exact('p', ops, now);
    for (let i = 0; i < ops.length; i++) {
      const l = found[i];
      if (l !== undefined) (d.outcomes[i] as Outcome).remaining += l.left;
    }
    return d;
  }

  /**
   * Before an operation by key on this instance: the key's lease ends, that of a lease call
   * in flight too; its units go back unless the key's state is being deleted (`reset`). Until
   * the operation calls the returned function, the key decides exactly: a lease granted
   * before the operation and kept after it would admit past a block, a penalty or a reset.
   */
  async forget(rule: RuleSpec, key: string, raw: string | undefined, giveBack: boolean): Promise<() => void> {
    const k = this.#host.keyOf(rule, key, raw);
    const fenced = this.#fenced;
    fenced.set(k, (fenced.get(k) ?? 0) + 1);
    const lift = () => {
      const n = (fenced.get(k) as number) - 1;
      if (n > 0) fenced.set(k, n);
      else fenced.delete(k);
    };
    for (let p = this.#pending.get(k); p !== undefined; p = this.#pending.get(k)) await p;
    const l = this.#table.get(k);
    if (l === undefined) return lift;
    this.#table.delete(k);
    if (giveBack) await this.#giveBack(l);
    else l.dead = true;
    return lift;
  }

  /**
   * Gives every lease back (the store is closing), those of lease calls still in flight too:
   * installed after the store closed, they would be given back by a sweep to a closed store.
   */
  async close(): Promise<void> {
    this.#closing = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
    while (this.#pending.size > 0) await Promise.all(this.#pending.values());
    const all = [...this.#table.values()];
    this.#table.clear();
    await Promise.all(all.map((l) => this.#giveBack(l)));
  }
}

/** Whether less than the lease's span has passed on the local clock since its call (`p`: Date.now()). */
function fresh(l: Lease, p: number): boolean {
  return p >= l.localAt && p - l.localAt < l.span;
}

/**
 * Whether a lease may be used at supplied time `t` (undefined: Redis time), `p` being
 * Date.now(): the clock MemoryStore decides on, read once per decision (performance.now()
 * costs more). A wall clock stepping back to before the lease's call ends the lease.
 */
function liveAt(l: Lease, t: number | undefined, p: number): boolean {
  if (!fresh(l, p)) return false;
  if (t === undefined) return !l.given;
  // Supplied time: a clock stepping back before the lease, or past its end, ends it.
  return l.given && t >= l.at && t - l.at < l.span;
}

/**
 * The time of a decision from a lease: the supplied time, or on Redis time the lease's
 * plus the whole ms elapsed locally since its call was sent (Redis' TIME is whole ms).
 */
function timeIn(l: Lease, t: number | undefined): number {
  return t ?? l.at + (Date.now() - l.localAt);
}

/** A leased admission's figures at `at`: Redis' remaining at lease time plus the units still held. */
function outcomeOf(l: Lease, at: number): Outcome {
  return {
    allowed: true,
    remaining: l.remaining + l.left,
    resetMs: Math.max(0, l.resetMs - (at - l.at)),
    retryAfterMs: 0,
    delayMs: 0,
    reason: undefined,
  };
}

/**
 * How long a lease counted at `at` may be used: `ttl`, and for a window's counts no longer
 * than the window or block they were counted in (a fixed window's end is its `resetMs` once
 * counted; a sliding window's current window and a sliding-buckets block are clock-aligned),
 * so no unit crosses into the next.
 */
function spanOf(rule: RuleSpec, ttl: number, at: number, resetMs: number): number {
  if (rule.algorithm === 'fixed-window') return Math.min(ttl, resetMs);
  if (rule.algorithm === 'sliding-window') return Math.min(ttl, rule.windowMs - (at % rule.windowMs));
  if (rule.algorithm === 'sliding-buckets') {
    const b = rule.windowMs / rule.buckets;
    return Math.min(ttl, b - (at % b));
  }
  return ttl;
}

/** The op giving `cost` units of a lease back. */
function opOf(l: Lease, cost: number): StoreOp {
  return l.raw === undefined ? { rule: l.rule, key: l.key, cost } : { rule: l.rule, key: l.key, raw: l.raw, cost };
}

function distinct(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) for (let j = 0; j < i; j++) if (keys[i] === keys[j]) return false;
  return true;
}
