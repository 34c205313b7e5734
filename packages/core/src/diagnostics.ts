/**
 * Observability through `node:diagnostics_channel`: metrics and tracing attach
 * by subscribing, without patching tollgate. Every publisher checks `hasSubscribers`
 * first, so with nobody listening the hot path builds no message objects at all.
 *
 * Channels (names are stable; message shapes may only grow):
 * - `tollgate:decision`    every decision: `{ decision, request, limiter }`
 * - `tollgate:rejected`    refused requests (429, or 503 when degraded): same shape
 * - `tollgate:delayed`     admitted but delayed (leaky queue, throttle): same shape
 * - `tollgate:dry-run`     a dry-run rule (or a dry-run limiter) would have refused: same shape
 * - `tollgate:store-error` a store call failed: `{ error, request, limiter, action }`
 * - `tollgate:in-flight`   a concurrency limit's or a shedder's in-flight count changed:
 *   `{ limiter, control, inFlight, limit }`
 * - `tollgate:memory-store:evicted` a MemoryStore at `maxKeys` evicted a refused or blocked
 *   state, nothing else being left: `{ store, ruleId, key, evictions }`
 * - `tollgate:key-op`      an operation by key (`get`, `reset`, `block`, `unblock`, `penalize`,
 *   `reward`) ran or failed: `{ operation, rule, key, units?, blockMs?, state?, error? }`
 *
 * A decision made by a limiter's engine carries how long it took (`durationMs` on the
 * message), measured only while `tollgate:decision` has a subscriber.
 *
 * See docs/diagnostics.md.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type { Decision } from './types.js';

export const CHANNEL_NAMES = {
  decision: 'tollgate:decision',
  rejected: 'tollgate:rejected',
  delayed: 'tollgate:delayed',
  dryRun: 'tollgate:dry-run',
  storeError: 'tollgate:store-error',
  inFlight: 'tollgate:in-flight',
  memoryEvicted: 'tollgate:memory-store:evicted',
  keyOp: 'tollgate:key-op',
} as const;

/** The channels themselves, for `subscribe` or for publishers in other packages. */
export const channels = {
  decision: diagnosticsChannel.channel(CHANNEL_NAMES.decision),
  rejected: diagnosticsChannel.channel(CHANNEL_NAMES.rejected),
  delayed: diagnosticsChannel.channel(CHANNEL_NAMES.delayed),
  dryRun: diagnosticsChannel.channel(CHANNEL_NAMES.dryRun),
  storeError: diagnosticsChannel.channel(CHANNEL_NAMES.storeError),
  inFlight: diagnosticsChannel.channel(CHANNEL_NAMES.inFlight),
  memoryEvicted: diagnosticsChannel.channel(CHANNEL_NAMES.memoryEvicted),
  keyOp: diagnosticsChannel.channel(CHANNEL_NAMES.keyOp),
} as const;

/** Where the engine leaves a decision's duration (ms) for `publishDecision`; never enumerable or serialised. */
export const DURATION: unique symbol = Symbol('tollgate.durationMs');

/**
 * Message on `tollgate:memory-store:evicted`: a MemoryStore at `maxKeys` had nothing left to
 * evict but refused or blocked states and evicted the oldest, giving that client a fresh
 * budget. Any such message means `maxKeys` is too small for the clients being refused.
 */
export interface HeldEvictionMessage {
  /** The MemoryStore. */
  store: object;
  /** The id of the rule whose state went (`<limiter prefix>:<group or name>:<kind>`). */
  ruleId: string;
  /** The (sanitised) key whose state went. */
  key: string;
  /** Such evictions by this store so far, this one included. */
  evictions: number;
}

/** Message on `tollgate:decision`, `:rejected`, `:delayed` and `:dry-run`. */
export interface DecisionMessage<R = unknown> {
  decision: Decision;
  /** The framework's request object. */
  request: R;
  /** The limiter's name (adapters: the `name` option, default `'rateLimit'`). */
  limiter: string;
  /** The whole limiter is in dry-run mode: a refusal here was not enforced. */
  dryRun: boolean;
  /**
   * How long the engine took to decide (keys, costs and the store's round trip), in ms;
   * present for a limiter's decisions made while `tollgate:decision` had a subscriber,
   * absent for the controls' (throttle, concurrency, shed).
   */
  durationMs?: number;
}

/** What happened to the request after a store failure. */
export type StoreErrorAction = 'allow' | 'deny' | 'local' | 'error' | 'custom';

/** Message on `tollgate:store-error`. */
export interface StoreErrorMessage<R = unknown> {
  error: unknown;
  /** The request being decided, when the failure happened during one. */
  request: R | undefined;
  limiter: string;
  /**
   * `allow`: let through; `deny`: refused with 503; `local`: decided locally; `error`:
   * handed to the app's error handler; `custom`: given to the app's own onStoreError function.
   */
  action: StoreErrorAction;
}

/**
 * Publishes a decision on `tollgate:decision` and, as it applies, on `:rejected`,
 * `:delayed` and `:dry-run`. Cheap when nobody subscribes. With `limiterDryRun`, a
 * refusal goes to `:dry-run` instead of `:rejected` (it was not enforced).
 */
export function publishDecision<R>(decision: Decision, request: R, limiter: string, limiterDryRun = false): void {
  const { decision: all, rejected, delayed, dryRun } = channels;
  const wantAll = all.hasSubscribers;
  const wantRejected = !decision.allowed && !limiterDryRun && rejected.hasSubscribers;
  const wantDelayed = decision.allowed && decision.delayMs > 0 && !limiterDryRun && delayed.hasSubscribers;
  const wantDryRun = (decision.dryRunRejectedBy.length > 0 || (limiterDryRun && !decision.allowed)) && dryRun.hasSubscribers;
  if (!(wantAll || wantRejected || wantDelayed || wantDryRun)) return;
  const message: DecisionMessage<R> = { decision, request, limiter, dryRun: limiterDryRun };
  const took = (decision as Decision & { [DURATION]?: number })[DURATION];
  if (took !== undefined) message.durationMs = took;
  if (wantAll) all.publish(message);
  if (wantRejected) rejected.publish(message);
  if (wantDelayed) delayed.publish(message);
  if (wantDryRun) dryRun.publish(message);
}

/** Publishes a store failure on `tollgate:store-error`. */
export function publishStoreError<R>(error: unknown, request: R | undefined, limiter: string, action: StoreErrorAction): void {
  if (!channels.storeError.hasSubscribers) return;
  const message: StoreErrorMessage<R> = { error, request, limiter, action };
  channels.storeError.publish(message);
}

/** Message on `tollgate:in-flight`. */
export interface InFlightMessage {
  /** The control's name (a concurrency limit's `name`; `'shed'` for a shedder). */
  limiter: string;
  control: 'concurrency' | 'shed';
  /** Requests this process holds now: admitted and not yet released. */
  inFlight: number;
  /** The most it admits at once (a concurrency limit's `global`, a shedder's `maxInFlight`), if it has one. */
  limit: number | undefined;
}

/** Publishes a control's new in-flight count on `tollgate:in-flight`. */
export function publishInFlight(limiter: string, control: InFlightMessage['control'], inFlight: number, limit: number | undefined): void {
  if (!channels.inFlight.hasSubscribers) return;
  const message: InFlightMessage = { limiter, control, inFlight, limit };
  channels.inFlight.publish(message);
}
