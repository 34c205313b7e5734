/**
 * Observability through `node:diagnostics_channel` (SPEC 9): metrics and tracing attach
 * by subscribing, without patching tollgate. Every publisher checks `hasSubscribers`
 * first, so with nobody listening the hot path builds no message objects at all.
 *
 * Channels (names are stable; message shapes may only grow):
 * - `tollgate:decision`    every decision: `{ decision, request, limiter }`
 * - `tollgate:rejected`    refused requests (429, or 503 when degraded): same shape
 * - `tollgate:delayed`     admitted but delayed (leaky queue, throttle): same shape
 * - `tollgate:dry-run`     a dry-run rule (or a dry-run limiter) would have refused: same shape
 * - `tollgate:store-error` a store call failed: `{ error, request, limiter, action }`
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
} as const;

/** The channels themselves, for `subscribe` or for publishers in other packages. */
export const channels = {
  decision: diagnosticsChannel.channel(CHANNEL_NAMES.decision),
  rejected: diagnosticsChannel.channel(CHANNEL_NAMES.rejected),
  delayed: diagnosticsChannel.channel(CHANNEL_NAMES.delayed),
  dryRun: diagnosticsChannel.channel(CHANNEL_NAMES.dryRun),
  storeError: diagnosticsChannel.channel(CHANNEL_NAMES.storeError),
} as const;

/** Message on `tollgate:decision`, `:rejected`, `:delayed` and `:dry-run`. */
export interface DecisionMessage<R = unknown> {
  decision: Decision;
  /** The framework's request object. */
  request: R;
  /** The limiter's name (adapters: the `name` option, default `'rateLimit'`). */
  limiter: string;
  /** The whole limiter is in dry-run mode: a refusal here was not enforced. */
  dryRun: boolean;
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
