/**
 * Counting by outcome: a rule with `countIf` (or `skipSuccessful` /
 * `skipFailed`) is consumed when the request is admitted, and given back once the
 * response has finished with a status the rule does not count. Framework- and
 * runtime-agnostic: the adapter's port says when a response finished, with its status.
 */
import { publishStoreError } from './diagnostics.js';
import type { Limiter } from './limiter.js';
import type { CompiledRule } from './rules.js';
import type { Decision } from './types.js';

const noop = () => {};

/** Calls its listener once with the response's status when the response has finished (never when it was cut short). */
export type OnFinish = (listener: (status: number) => void) => void;

/**
 * The rules of a limiter whose count depends on the response, its tiers' included
 * (computed once per limiter; a rule of a tier the request was not in is not in its
 * decision, and refunding it is a no-op).
 */
export function countedRules<R>(lim: Limiter<R>): readonly CompiledRule<R>[] {
  const all = [...lim.rules, ...Object.values(lim.tiers ?? {}).flat()];
  return all.filter((r) => r.countIf !== undefined);
}

/**
 * When the response finishes (`onFinish`), refunds what the admitted decision `d` consumed for every rule of
 * `counted` whose `countIf` does not count the status. A store failure on the refund is
 * published under `name` and otherwise ignored: the request is already answered.
 * @example if (d.allowed && counted.length > 0) refundUncountedOnFinish(lim, counted, req, (fn) => port.onFinish(req, res, fn), d, name)
 */
export function refundUncountedOnFinish<R>(
  lim: Limiter<R>,
  counted: readonly CompiledRule<R>[],
  req: R,
  onFinish: OnFinish,
  d: Decision,
  name: string,
): void {
  onFinish((status) => {
    const names: string[] = [];
    for (const r of counted) {
      let counts = true;
      try {
        const v: unknown = (r.countIf as NonNullable<CompiledRule['countIf']>)(status);
        // A promise is never awaited (the response is over): it counts, and its rejection is caught.
        if (typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function') Promise.resolve(v).catch(noop);
        else counts = v !== false;
      } catch {
        // A throwing countIf counts the request: failing closed keeps the limit.
      }
      if (!counts) names.push(r.spec.name);
    }
    if (names.length > 0) lim.refund(req, d, { rules: names }).catch((err) => publishStoreError(err, req, name, 'allow'));
  });
}
