/**
 * `createFetch`: a fetch that waits its turn and retries politely.
 *
 * Per call: wait for the scope's RateLimit hold and pacing (gate.ts), send, learn from
 * the response's RateLimit / Retry-After headers, and on a retryable outcome (a status in
 * `statuses`, a network error, a per-attempt timeout) of a call that is safe to repeat
 * (request.ts) wait — Retry-After when the server gave one, plus full jitter
 * (backoff.ts) — and try again, within `retries`, `maxWaitMs` and `deadlineMs`. When the
 * client stops, the caller gets the last response as fetch would have returned it, or
 * the last error. The caller's AbortSignal ends any wait at once.
 */
import { retryWaitMs } from './backoff.js';
import { TollgateClientError } from './errors.js';
import { DeadlineReached, Gate } from './gate.js';
import { type CreateFetchOptions, type GiveUpReason, type NormalizedOptions, normalizeOptions, type RetryReason } from './options.js';
import { exhaustedWaitMs, parseRateLimit, servedFromCache } from './ratelimit-headers.js';
import { type FetchInput, type PreparedCall, prepareCall } from './request.js';
import { parseRetryAfter } from './retry-after.js';
import { linkedController } from './sleep.js';

type Outcome =
  | { response: Response; error?: undefined; timedOut?: undefined }
  | { response?: undefined; error: unknown; timedOut: boolean };

/**
 * Wraps a fetch so it honours `Retry-After` and `RateLimit` headers, backs off with full
 * jitter, and optionally paces itself with a core rule.
 * @example
 * const politeFetch = createFetch({ pace: '10/s', idempotencyKey: true });
 * const res = await politeFetch('https://api.example.com/items');
 * @throws TollgateClientError on invalid options (TGC_INVALID_OPTION, TGC_UNKNOWN_OPTION, TGC_NO_FETCH)
 */
export function createFetch(options?: CreateFetchOptions): typeof fetch {
  const o = normalizeOptions(options);
  const gate = new Gate(o);

  async function politeFetch(input: FetchInput, init?: RequestInit): Promise<Response> {
    const inner = o.fetch ?? globalThis.fetch;
    const call = prepareCall(input, init, o.idempotencyKey);
    if (!call) return inner(input, init);
    const scope = o.scope(call.url, call.method);
    const deadlineAt = o.deadlineMs === undefined ? Number.POSITIVE_INFINITY : o.clock.now() + o.deadlineMs;

    let last: Outcome | undefined;
    for (let attempt = 1; ; attempt++) {
      if (call.signal?.aborted) throw call.signal.reason;
      let done: () => void;
      try {
        done = await gate.admit(call, scope, deadlineAt);
      } catch (e) {
        if (!(e instanceof DeadlineReached)) throw e;
        if (last === undefined) throw deadlineError(call, o);
        return giveUp(last, 'deadline', attempt - 1, call);
      }

      let outcome: Outcome;
      let serverWaitMs: number | undefined;
      try {
        outcome = await send(inner, call, attempt, o);
        if (outcome.response) serverWaitMs = learn(outcome.response, scope);
      } finally {
        // A probe's lane opens only now, when the scope's new limits are known.
        done();
      }
      last = outcome;

      let reason: RetryReason;
      if (outcome.response) {
        if (!o.statuses.has(outcome.response.status)) return outcome.response;
        reason = 'status';
      } else reason = outcome.timedOut ? 'timeout' : 'network';

      if (!call.retryable) return giveUp(outcome, 'not-retryable', attempt, call);
      if (attempt > o.retries) return giveUp(outcome, 'attempts', attempt, call);
      if (serverWaitMs !== undefined && serverWaitMs > o.maxWaitMs) return giveUp(outcome, 'max-wait', attempt, call);
      const waitMs = retryWaitMs({ n: attempt, serverWaitMs, jitter: o.jitter, baseMs: o.baseMs, capMs: o.capMs, random: o.random });
      if (o.clock.now() + waitMs > deadlineAt) return giveUp(outcome, 'deadline', attempt, call);

      o.onRetry?.({
        retry: attempt,
        attempt: attempt + 1,
        waitMs,
        reason,
        ...(outcome.response && { status: outcome.response.status }),
        ...(serverWaitMs !== undefined && { serverWaitMs }),
        ...(outcome.error !== undefined && { error: outcome.error }),
        url: call.url.href,
        method: call.method,
      });
      // Free the connection: the body of a response we retry is never read. Not awaited: the
      // cancel of a teed body (a cloned Response) settles only when every branch is cancelled.
      outcome.response?.body?.cancel().catch(() => {});
      await o.sleep(waitMs, call.signal);
    }
  }

  /**
   * Records what the response says about the scope's limits; returns the wait it asks for.
   * draft-ietf-httpapi-ratelimit-headers-11's client rules: a refusal's `Retry-After` takes
   * precedence over a policy's `t`, and the RateLimit fields of a response served from a
   * cache (`Age` > 0) describe an earlier moment, so they are ignored.
   */
  function learn(response: Response, scope: string): number | undefined {
    const now = o.clock.now();
    const h = response.headers;
    let wait = o.statuses.has(response.status) ? parseRetryAfter(h.get('retry-after'), now, h.get('date')) : undefined;
    if (wait === undefined && !servedFromCache(h)) wait = exhaustedWaitMs(parseRateLimit(h, now));
    if (wait !== undefined && wait <= o.maxWaitMs) gate.hold(scope, wait);
    return wait;
  }

  function giveUp(last: Outcome, reason: GiveUpReason, attempts: number, call: PreparedCall): Response {
    o.onGiveUp?.({
      reason,
      attempts,
      ...(last.response && { status: last.response.status }),
      ...(last.error !== undefined && { error: last.error }),
      url: call.url.href,
      method: call.method,
    });
    if (last.response) return last.response;
    throw last.error;
  }

  return politeFetch as typeof fetch;
}

/** One attempt. Rejects only when the caller aborts; every other failure is an outcome. */
async function send(inner: typeof fetch, call: PreparedCall, attempt: number, o: NormalizedOptions): Promise<Outcome> {
  const { controller, dispose } = linkedController([call.signal]);
  let timedOut = false;
  const timer = o.timeoutMs === undefined ? undefined : new AbortController();
  if (timer && o.timeoutMs !== undefined) {
    const ms = o.timeoutMs;
    o.sleep(ms, timer.signal).then(
      () => {
        timedOut = true;
        controller.abort(
          new TollgateClientError(
            'TGC_TIMEOUT',
            `${call.method} ${call.url.href}: expected response headers within ${ms} ms (timeoutMs), received none on attempt ${attempt}. ` +
              'Raise timeoutMs, or make the request retryable (an idempotent method or an Idempotency-Key).',
          ),
        );
      },
      () => {},
    );
  }
  try {
    const [input, init] = call.args(controller.signal);
    // The link to the caller's signal stays in place on success: it still aborts the body.
    return { response: await inner(input, init) };
  } catch (error) {
    dispose();
    if (call.signal?.aborted) throw call.signal.reason;
    return { error: timedOut ? controller.signal.reason : error, timedOut };
  } finally {
    timer?.abort();
  }
}

function deadlineError(call: PreparedCall, o: NormalizedOptions): TollgateClientError {
  return new TollgateClientError(
    'TGC_DEADLINE_EXCEEDED',
    `${call.method} ${call.url.href}: expected to be sent within deadlineMs (${o.deadlineMs} ms), received a pacing or RateLimit wait ` +
      'that ends later; the request was not sent. Raise deadlineMs, or pace fewer requests.',
  );
}
