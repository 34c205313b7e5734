/**
 * Diagnostics for the controls: their decisions go out on the same
 * `tollgate:decision` / `:rejected` / `:delayed` channels as the limiter's, as
 * `Decision` objects whose rules carry the control's own figures. The decision is only
 * built when someone listens, so the hot path pays one `hasSubscribers` check.
 */
import { channels, publishDecision } from '../diagnostics.js';
import type { Decision, RuleResult } from '../types.js';

/** Publishes the decision `build()` returns, if any channel has a subscriber. */
export function publishControl<R>(request: R, name: string, build: () => Decision): void {
  if (!(channels.decision.hasSubscribers || channels.rejected.hasSubscribers || channels.delayed.hasSubscribers)) return;
  publishDecision(build(), request, name);
}

/** A decision made of one control's figures. */
export function controlDecision(rules: RuleResult[], allowed: boolean, retryAfterMs: number, delayMs: number, at: number): Decision {
  return {
    allowed,
    delayMs: allowed ? delayMs : 0,
    retryAfterMs: allowed ? 0 : retryAfterMs,
    rejectedBy: rules.filter((r) => !r.allowed).map((r) => r.name),
    dryRunRejectedBy: [],
    rules,
    at,
  };
}
