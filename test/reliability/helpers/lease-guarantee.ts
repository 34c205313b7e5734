/**
 * The lease guarantee checked offline from admissions ([time, cost], in time order), as
 * docs/distributed.md "Leases" states it: a window's algorithms admit at most L in any
 * interval shortened by ttl (or a block), the buckets at most B + r·(T + ttl) in any T.
 */

/** The most units admitted in any interval shorter than `span` ms. */
export function mostInAny(admitted: readonly (readonly [number, number])[], span: number): number {
  let from = 0;
  let sum = 0;
  let most = 0;
  for (const [t, c] of admitted) {
    sum += c;
    while ((admitted[from] as readonly [number, number])[0] <= t - span) sum -= (admitted[from++] as readonly [number, number])[1];
    most = Math.max(most, sum);
  }
  return most;
}

/** The most a bucket of `limit` per `windowMs` admitted in any interval T beyond limit + r·(T + ttl); ≤ 0 when it holds. */
export function bucketExcess(admitted: readonly (readonly [number, number])[], limit: number, windowMs: number, ttl: number): number {
  const r = limit / windowMs;
  let worst = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < admitted.length; i++) {
    let sum = 0;
    for (let j = i; j < admitted.length; j++) {
      sum += (admitted[j] as readonly [number, number])[1];
      const T = (admitted[j] as readonly [number, number])[0] - (admitted[i] as readonly [number, number])[0];
      worst = Math.max(worst, sum - (limit + r * (T + ttl)));
    }
  }
  return worst;
}
