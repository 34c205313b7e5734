/**
 * Shapes shared by the engine, the algorithms and every store.
 */

export type AlgorithmName = 'fixed-window' | 'sliding-log' | 'sliding-window' | 'token-bucket' | 'leaky-bucket' | 'sliding-buckets';

/** Why a rule refused a request. */
export type RejectReason = 'limit' | 'blocked' | 'cost_exceeds_limit';

/**
 * The store-facing, serialisable form of a rule: everything an algorithm (in JS or in
 * Lua) needs to decide. Produced once at construction by `compileRules`.
 */
export interface RuleSpec {
  /** The rule's name: unique in a stack; the policy name in headers. */
  readonly name: string;
  /**
   * Storage identity: `<prefix>:<group ?? name>:<kind>`, already escaped, where the kind is
   * the algorithm and window (`stateKind` in rules.ts, e.g. `w60000`): rules that count
   * differently never share state, while a change of limit keeps it.
   */
  readonly id: string;
  readonly algorithm: AlgorithmName;
  /** L: units per window (for buckets the refill is L per window). */
  readonly limit: number;
  /** W in ms. For a calendar quota, the nominal length (a day, or 31 days for a month). */
  readonly windowMs: number;
  /** B: bucket capacity (token/leaky meter). Defaults to `limit`. */
  readonly burst: number;
  /** Q: places in a leaky queue. Defaults to `limit`. */
  readonly queue: number;
  /** N: the blocks a sliding-buckets window is cut into (W / N ms each); 1 for the other algorithms. */
  readonly buckets: number;
  readonly align: 'clock' | 'first-request';
  readonly mode: 'meter' | 'queue';
  /** UTC calendar windows for quotas (fixed-window only). */
  readonly calendar: 'day' | 'month' | undefined;
  /** 0 when the rule does not block. */
  readonly blockForMs: number;
  readonly countRejected: boolean;
  readonly dryRun: boolean;
  /** The largest cost this rule can ever admit. */
  readonly maxCost: number;
}

/** One rule's verdict, as a store computes it. */
export interface Outcome {
  allowed: boolean;
  /** Whole units left now (after this request if it was admitted). */
  remaining: number;
  /** ms until the full quota is restored if nothing else arrives. */
  resetMs: number;
  /** ms until the same request would be admitted; 0 when admitted or when waiting cannot help. */
  retryAfterMs: number;
  /** ms the request must wait before it proceeds (leaky queue); 0 otherwise. */
  delayMs: number;
  reason: RejectReason | undefined;
}

/** The per-rule figures of a decision, in the order the rules were declared. */
export interface RuleResult {
  name: string;
  allowed: boolean;
  limit: number;
  remaining: number;
  windowMs: number;
  resetMs: number;
  retryAfterMs: number;
  delayMs: number;
  /** Why the rule refused, when it did. */
  reason?: RejectReason;
  /** The rule is in dry-run mode: its refusal does not refuse the request. */
  dryRun?: boolean;
}

/** The outcome of one request against a stack. */
export interface Decision {
  allowed: boolean;
  /** The longest delay among the rules (leaky queue); 0 when rejected. */
  delayMs: number;
  /** The largest retryAfterMs among the rejecting rules; 0 when allowed. */
  retryAfterMs: number;
  /** Names of every rule that rejected (dry-run rules excluded). */
  rejectedBy: string[];
  /** Rules that would have rejected but are in dry-run mode. */
  dryRunRejectedBy: string[];
  /** One entry per applied rule, in declaration order. */
  rules: RuleResult[];
  /** The time (store clock, ms) at which the decision was made. */
  at: number;
  /** Set when the store's failure policy decided; `'deny'` answers 503. */
  degraded?: 'allow' | 'deny' | 'local';
}

/** One rule applied to one request, as handed to a store. */
export interface StoreOp {
  readonly rule: RuleSpec;
  /** The sanitised key (never longer than the bound, never with `{` or `}`). */
  readonly key: string;
  /**
   * The key as the rule's key function returned it (as text), before sanitising: for a
   * Redis Cluster `hashTag` function, which must see what the application wrote. Never
   * stored; absent on ops built by hand, where `key` stands for it.
   */
  readonly raw?: string;
  readonly cost: number;
}

/** What a store returns for a stack. `outcomes[i]` belongs to `ops[i]`. */
export interface StoreDecision {
  allowed: boolean;
  now: number;
  outcomes: Outcome[];
  /**
   * Set when the store could not decide and its failure policy answered instead:
   * `'deny'` maps to 503 at the HTTP layer. Absent for a normal decision.
   */
  degraded?: 'allow' | 'deny' | 'local';
}

/** One operation on a key's state, as a store receives it (validated by the limiter). */
export type KeyOp =
  | { readonly kind: 'get' }
  | ({ readonly kind: 'block'; readonly ms: number } & KeyOpId)
  | ({ readonly kind: 'unblock' } & KeyOpId)
  | ({ readonly kind: 'penalize'; readonly units: number } & KeyOpId)
  | ({ readonly kind: 'reward'; readonly units: number } & KeyOpId);

/**
 * An operation's id (sanitised like a key): a store applies a change once per (rule, key,
 * id) for a day, so a retried call changes nothing more; a store may ignore it.
 */
export interface KeyOpId {
  readonly id?: string;
}

/** A key's state as a store reports it, after the operation. */
export interface StoreKeyState {
  /** The store's time the operation ran at (ms). */
  now: number;
  /** Whether the store holds state for the key (after the operation). */
  exists: boolean;
  /** Whole units a request could take now (0 while blocked). */
  remaining: number;
  /** ms until the full budget is back (and any block is over) if nothing else arrives. */
  resetMs: number;
  /** ms until a request of cost 1 would be admitted; 0 when it would be now. */
  retryAfterMs: number;
  /** The block deadline (store time, ms); 0 when the key is not blocked. */
  blockedUntil: number;
}

/**
 * The store contract. Only atomic operations: a stack is decided as one
 * all-or-nothing step. `now` is supplied when the limiter has a clock; otherwise the
 * store uses its own time (Redis: `TIME`).
 */
export interface Store {
  /** Decide a stack and consume every rule's cost if (and only if) all admit. */
  consume(ops: readonly StoreOp[], now?: number): Promise<StoreDecision>;
  /** Decide without changing anything. */
  peek(ops: readonly StoreOp[], now?: number): Promise<StoreDecision>;
  /**
   * Give back what a decision made at `at` consumed. `degraded` is the decision's mark:
   * `'local'` when the store's failure policy decided it in-process, so its units were
   * counted there (a store without a fallback ignores it).
   */
  refund(ops: readonly StoreOp[], at: number, now?: number, degraded?: 'local'): Promise<void>;
  /**
   * Optional ability: settle a reservation made by a decision at `at`, atomically (one round
   * trip). Each op's `cost` is the actual cost less the estimate: below zero the difference
   * is given back as `refund` gives it (never more than the reservation still weighs),
   * above zero it is charged without refusing, into a debt later requests wait out. A store
   * without it makes `limiter.reserve` reject with `TG_STORE_UNSUPPORTED`. `degraded` as for
   * `refund`.
   */
  settle?(ops: readonly StoreOp[], at: number, now?: number, degraded?: 'local'): Promise<void>;
  /** Forget a key's state for a rule (`raw`: the key before sanitising, as in `StoreOp`). */
  reset(rule: RuleSpec, key: string, raw?: string): Promise<void>;
  /** Release timers and connections owned by the store. */
  close(): Promise<void>;
  /**
   * Optional ability: the same decision as `consume`, returned synchronously. Stores that
   * decide in-process (MemoryStore) declare it so the engine skips a promise hop.
   */
  consumeSync?(ops: readonly StoreOp[], now?: number): StoreDecision;
  /**
   * Optional ability: prepares a stack once (the rules a limiter may hand over, in the order
   * it hands them) into a plan that decides synchronously, in process. The limiter decides
   * through the plan and prepares again when its rules change; a store without it is asked
   * through `consumeSync` or `consume`.
   */
  prepare?(rules: readonly RuleSpec[]): StackPlan;
  /**
   * Optional ability: the decision `consume` would make, returned synchronously when the
   * store can make it in-process (a RedisStore deciding from a lease), else `undefined`, and
   * the engine calls `consume`. Its answer is read at once: the store may reuse the object.
   */
  consumeLocal?(ops: readonly StoreOp[], now?: number): StoreDecision | undefined;
  /**
   * Optional ability: one operation on a (rule, key) state without a request (read it,
   * block, unblock, penalize, reward), atomic, answering the state after it. `key` is
   * sanitised and `raw` is what the operator gave, as in `StoreOp`. A store without it makes
   * the limiter's `get`, `block`, `unblock`, `penalize` and `reward` reject with
   * `TG_STORE_UNSUPPORTED` (a reset by key needs only `reset`).
   */
  keyOp?(rule: RuleSpec, key: string, op: KeyOp, now?: number, raw?: string): Promise<StoreKeyState>;
}

/**
 * A stack prepared by a store (`Store.prepare`): the same decision as `Store.consume`,
 * made synchronously. Its ops' rules are the prepared ones (or specs derived from them: the
 * same `id`), in order, some possibly left out; a rule it was not prepared for is decided
 * too, only slower.
 */
export interface StackPlan {
  /**
   * Decides a stack and consumes every rule's cost if (and only if) all admit. The
   * decision and its outcomes are the plan's own, overwritten by its next decision: read
   * them before deciding again.
   */
  consume(ops: readonly StoreOp[], now?: number): StoreDecision;
}
