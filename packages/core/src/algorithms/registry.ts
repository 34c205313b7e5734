/**
 * The registry: one entry per algorithm, and every per-algorithm table derived from it
 * (storage kinds, wire codes, slab widths, the option checks, the CLI's choices). A new
 * algorithm is its kernel (or check), its refund and expiry, and one entry here.
 */
import type { AlgorithmName } from '../types.js';
import { fixedWindow, fixedWindowKernel } from './fixed-window.js';
import { leakyBucket, leakyBucketKernel } from './leaky-bucket.js';
import { rewardSlidingBuckets, slidingBuckets } from './sliding-buckets.js';
import { rewardSlidingLog, slidingLog } from './sliding-log.js';
import { rewardSlidingWindow, slidingWindow, slidingWindowKernel } from './sliding-window.js';
import { tokenBucket, tokenBucketKernel } from './token-bucket.js';
import { type Algorithm, type AlgorithmDef, CHARGE_MAX, chargeByCheck, LOG_CHARGE_MAX, type State } from './types.js';

const always = (): boolean => true;

/** A reward as a refund of `units` consumed right now (the counters that refund exactly). */
function rewardByRefund(a: Algorithm): AlgorithmDef['reward'] {
  return (s, now, r, units) => a.refund(s, now, r, units, now);
}

export const registry: Readonly<Record<AlgorithmName, AlgorithmDef>> = {
  'fixed-window': {
    ...fixedWindow,
    name: 'fixed-window',
    code: 'f',
    width: 2,
    kernel: fixedWindowKernel,
    bucket: false,
    scaled: false,
    timeState: false,
    options: ['align', 'quota'],
    countsRefusals: always,
    charge: chargeByCheck(fixedWindow.check, 1, 1, CHARGE_MAX),
    reward: rewardByRefund(fixedWindow),
    spellings: { 'fixed-window-first-request': "algorithm: 'fixed-window', align: 'first-request'" },
  },
  'sliding-log': {
    ...slidingLog,
    name: 'sliding-log',
    code: 's',
    width: 0,
    kernel: undefined,
    bucket: false,
    scaled: false,
    timeState: false,
    options: [],
    countsRefusals: always,
    charge: chargeByCheck(slidingLog.check, -1, 1, LOG_CHARGE_MAX),
    reward: rewardSlidingLog,
    spellings: { 'sliding-window-log': "algorithm: 'sliding-log'" },
  },
  'sliding-window': {
    ...slidingWindow,
    name: 'sliding-window',
    code: 'w',
    width: 3,
    kernel: slidingWindowKernel,
    bucket: false,
    scaled: true,
    timeState: false,
    options: [],
    countsRefusals: always,
    charge: chargeByCheck(slidingWindow.check, 2, 1, CHARGE_MAX),
    reward: rewardSlidingWindow,
    spellings: { 'sliding-window-counter': "algorithm: 'sliding-window'" },
  },
  'token-bucket': {
    ...tokenBucket,
    name: 'token-bucket',
    code: 't',
    width: 2,
    kernel: tokenBucketKernel,
    bucket: true,
    scaled: true,
    timeState: false,
    options: ['burst'],
    countsRefusals: always,
    charge: chargeByCheck(tokenBucket.check, 1, -1, CHARGE_MAX),
    reward: rewardByRefund(tokenBucket),
    spellings: {},
  },
  'leaky-bucket': {
    ...leakyBucket,
    name: 'leaky-bucket',
    code: 'k',
    width: 1,
    kernel: leakyBucketKernel,
    bucket: true,
    scaled: false,
    timeState: true,
    options: ['mode', 'burst', 'queue'],
    // A queue shapes: a refused request takes no place in it.
    countsRefusals: (r) => r.mode !== 'queue',
    charge(s, now, r, units): State {
      // The stored time moves on by units·T whatever the tolerance (never beyond CHARGE_MAX ahead).
      const base = s === undefined ? now : Math.max(now, s[0] as number);
      return [Math.min(base + units * (r.windowMs / r.limit), now + CHARGE_MAX)];
    },
    reward: rewardByRefund(leakyBucket),
    spellings: {
      'leaky-queue': "algorithm: 'leaky-bucket', mode: 'queue'",
      'leaky-bucket-queue': "algorithm: 'leaky-bucket', mode: 'queue'",
      'leaky-meter': "algorithm: 'leaky-bucket', mode: 'meter'",
      'leaky-bucket-meter': "algorithm: 'leaky-bucket', mode: 'meter'",
      gcra: "algorithm: 'leaky-bucket', mode: 'meter'",
    },
  },
  'sliding-buckets': {
    ...slidingBuckets,
    name: 'sliding-buckets',
    code: 'b',
    width: 0,
    kernel: undefined,
    bucket: false,
    scaled: false,
    timeState: false,
    options: ['buckets'],
    countsRefusals: always,
    charge: chargeByCheck(slidingBuckets.check, -1, 1, LOG_CHARGE_MAX),
    reward: rewardSlidingBuckets,
    spellings: { 'sliding-window-buckets': "algorithm: 'sliding-buckets'" },
  },
};

/** Every algorithm's name, in the registry's order. */
export const ALGORITHM_NAMES = Object.keys(registry) as readonly AlgorithmName[];

/** Each algorithm's one-letter code: its state kind in storage ids and its Redis wire code. */
export const ALGORITHM_CODES = Object.fromEntries(ALGORITHM_NAMES.map((a) => [a, registry[a].code])) as Readonly<
  Record<AlgorithmName, string>
>;
