/**
 * Counting by outcome: a rule with `countIf` (or `skipSuccessful` /
 * `skipFailed`) is consumed when the request is admitted, and given back once the
 * response has finished with a status the rule does not count. Framework-agnostic:
 * adapters hand over Node's response (`res`, or Fastify's `reply.raw`), whose `finish`
 * fires once per response, for streamed and hijacked ones too.
 */
import { publishStoreError } from './diagnostics.js';
import type { Limiter } from './limiter.js';
import type { CompiledRule } from './rules.js';
import type { Decision } from './types.js';

const noop = () => {};

/** The part of Node's `ServerResponse` counting by outcome reads. */
export interface FinishingResponse {
  once(event: 'finish', listener: () => void): unknown;
  readonly statusCode: number;
}

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
 * When `res` finishes, refunds what the admitted decision `d` consumed for every rule of
 * `counted` whose `countIf` does not count the status. A store failure on the refund is
 * published under `name` and otherwise ignored: the request is already answered.
 * @example if (d.allowed && counted.length > 0) refundUncountedOnFinish(lim, counted, req, res, d, name)
 */
export function refundUncountedOnFinish<R>(
  lim: Limiter<R>,
  counted: readonly CompiledRule<R>[],
  req: R,
  res: FinishingResponse,
  d: Decision,
  name: string,
): void {
  res.once('finish', () => {
    const names: string[] = [];
    for (const r of counted) {
      let counts = true;
      try {
        const v: unknown = (r.countIf as NonNullable<CompiledRule['countIf']>)(res.statusCode);
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
