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
 *
 * This file follows a decision: `local` (memory speed), else `consume` → `#call` (what
 * leases cover is taken, the rest sized and leased in one call) → the lease installed in
 * the table. Its parts: lease.ts (one lease and its figures), table.ts (the leases held
 * and their give-backs), calls.ts (a tick's lease calls as one Redis call), options.ts.
 */
import type { Outcome, RuleSpec, StoreDecision, StoreOp } from '@tollgate/core';
import { distinct, type Lease, leasable, liveAt, outcomeOf, spanOf, timeIn } from './lease.js';
import { type LeaseSettings, ttlProblem } from './options.js';
import { LeaseTable } from './table.js';

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

export class Leases {
  readonly settings: LeaseSettings;
  readonly #host: LeaseHost;
  /** The leases held, by Redis key, and their give-backs. */
  readonly #table: LeaseTable;
  /** Lease calls in flight by Redis key: a decision on such a key waits for it once. */
  readonly #pending = new Map<string, Promise<void>>();
  /** Rules checked against `ttl`: true when they lease. */
  readonly #rules = new WeakMap<RuleSpec, boolean>();
  /** Keys under an operation by key on this instance (with how many): decided exactly meanwhile. */
  readonly #fenced = new Map<string, number>();
  /** The store is closing: no lease is taken, and those whose call was in flight go back with the rest. */
  #closing = false;
  /** Lease calls past their deadline whose Redis answer has not come (see `late`). */
  #lateCalls = 0;
  /** Resets on this instance while late calls were out, counted; each key's latest (cleared with the last late call). */
  #resets = 0;
  readonly #resetAt = new Map<string, number>();
  /** The answer `local` reuses for the engine (see consumeLocal). */
  readonly #oneOutcome: Outcome = { allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0, delayMs: 0, reason: undefined };
  readonly #one: StoreDecision = { allowed: true, now: 0, outcomes: [this.#oneOutcome] };

  constructor(settings: LeaseSettings, host: LeaseHost) {
    this.settings = settings;
    this.#host = host;
    this.#table = new LeaseTable(settings.ttlMs, settings.maxKeys, host.giveBack);
  }

  /** Live leases (for tests and diagnostics). */
  get size(): number {
    return this.#table.size;
  }

  /** The time units counted at supplied time `t` go back at (see LeaseTable.latest). */
  giveBackTime(t: number | undefined): number | undefined {
    return this.#table.latest(t);
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

  /**
   * The decision when every rule holds a live lease covering its cost (taken from them),
   * else undefined: memory speed, no promise. `t` is the supplied time (checked), or
   * undefined on Redis time.
   */
  local(ops: readonly StoreOp[], t: number | undefined, reuse = false): StoreDecision | undefined {
    const table = this.#table;
    table.saw(t);
    const host = this.#host;
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
      if (l !== undefined && l.rule === op.rule && l.left >= op.cost && this.#table.live(l, t)) {
        l.left -= op.cost;
        l.used += op.cost;
        taken[i] = l;
      } else {
        const once = l === undefined || l.rule !== op.rule || (l.used <= op.cost && !this.#table.live(l, t));
        most = once ? 0 : Math.min(most, Math.max(2, 2 * l.used));
        if (l !== undefined) this.#table.end(k, l);
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
      this.#table.putBack(ops, taken);
      throw err;
    } finally {
      for (const k of subKeys) if (this.#pending.get(k) === pending) this.#pending.delete(k);
      done();
    }
    return this.#answer(ops, keys, t, taken, need, reply, localAt);
  }

  /**
   * A lease call's answer: each leased op's grant installed as its key's lease (what it
   * holds beyond the request's cost counted in `remaining`); in a refused stack the units
   * taken from leases go back to them.
   */
  #answer(
    ops: readonly StoreOp[],
    keys: readonly string[],
    t: number | undefined,
    taken: readonly (Lease | undefined)[],
    need: readonly number[],
    reply: LeaseReply,
    localAt: number,
  ): StoreDecision {
    const n = ops.length;
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
      this.#table.install(keys[i] as string, {
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
        dropped: false,
      });
    }
    if (!d.allowed) this.#table.putBack(ops, taken);
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

  /**
   * A refund of a decision made at `at`: the units of a decision made during a lease still
   * live (while a key's lease is live its decisions are that lease's) go back to it: they
   * stay counted in Redis and are used within its ttl. The rest go to Redis.
   */
  refund(ops: readonly StoreOp[], at: number, t: number | undefined): StoreOp[] {
    return this.#takeBack(ops, at, t, false);
  }

  /** A settle: what it gives back (a cost below zero) goes to a live lease as a refund does; the rest to Redis. */
  settle(ops: readonly StoreOp[], at: number, t: number | undefined): StoreOp[] {
    return this.#takeBack(ops, at, t, true);
  }

  #takeBack(ops: readonly StoreOp[], at: number, t: number | undefined, settle: boolean): StoreOp[] {
    // Every key first: a `hashTag` that throws leaves every lease as it was.
    const keys = ops.map((op) => this.#host.keyOf(op.rule, op.key, op.raw));
    const rest: StoreOp[] = [];
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      const units = settle ? -op.cost : op.cost;
      // A settle above the estimate (a cost above zero) is charged in Redis.
      if (settle && units <= 0) rest.push(op);
      else if (!this.#table.takeBack(keys[i] as string, op, units, at, t)) rest.push(op);
    }
    return rest;
  }

  /** A peek: answered locally when every rule's lease covers it; else Redis', with held units added. */
  async peek(ops: readonly StoreOp[], now: number | undefined): Promise<StoreDecision> {
    const t = this.#host.time(now);
    const found: (Lease | undefined)[] = ops.map((op) => {
      const l = this.#table.get(this.#host.keyOf(op.rule, op.key, op.raw));
      return l !== undefined && !l.dead && l.rule === op.rule && this.#table.live(l, t) ? l : undefined;
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
    if (!giveBack) {
      this.#table.drop(k);
      if (this.#lateCalls > 0) this.#resetAt.set(k, ++this.#resets);
      return lift;
    }
    const l = this.#table.remove(k);
    if (l !== undefined) await this.#table.giveBack(l);
    return lift;
  }

  /**
   * A lease call missed its deadline and Redis may still run it: `answered` (which never
   * rejects) settles when its answer comes or never will. Returns whether a key was reset on
   * this instance since: sent after the call on its connection, the reset dropped the
   * surplus with the state, and giving it back would credit the fresh state.
   */
  late(answered: Promise<void>): (key: string) => boolean {
    const mark = this.#resets;
    this.#lateCalls++;
    void answered.finally(() => {
      if (--this.#lateCalls === 0) this.#resetAt.clear();
    });
    return (key) => (this.#resetAt.get(key) ?? 0) > mark;
  }

  /**
   * Gives every lease back (the store is closing), those of lease calls still in flight too:
   * installed after the store closed, they would be given back by a sweep to a closed store.
   */
  async close(): Promise<void> {
    this.#closing = true;
    this.#table.closing();
    while (this.#pending.size > 0) await Promise.all(this.#pending.values());
    await this.#table.close();
  }
}
