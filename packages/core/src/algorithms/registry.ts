/**
 * The registry: one entry per algorithm, and every per-algorithm table derived from it
 * (storage kinds, wire codes, slab widths, the option checks, the CLI's choices). A new
 * algorithm is its kernel (or check), its refund and expiry, and one entry here.
 */
import type { AlgorithmName, RuleSpec } from '../types.js';
import { fixedWindow, fixedWindowKernel } from './fixed-window.js';
import { leakyBucket, leakyBucketKernel } from './leaky-bucket.js';
import { rewardSlidingBuckets, slidingBuckets } from './sliding-buckets.js';
import { rewardSlidingLog, slidingLog } from './sliding-log.js';
import { rewardSlidingWindow, slidingWindow, slidingWindowKernel } from './sliding-window.js';
import { tokenBucket, tokenBucketKernel } from './token-bucket.js';
import { type Algorithm, type AlgorithmDef, type AlgorithmOption, CHARGE_MAX, chargeByCheck, LOG_CHARGE_MAX, type State } from './types.js';

const always = (): boolean => true;
const never = (): boolean => false;
const none = (): undefined => undefined;
const noPeriod = (): number => Number.POSITIVE_INFINITY;
const byLimit = (r: Pick<RuleSpec, 'limit'>): number => r.limit;
const byQueue = (r: Pick<RuleSpec, 'queue'>): number => r.queue;
/** The end of the clock-aligned period of `p` ms containing `at`. */
const periodOf = (at: number, p: number): number => at - (at % p) + p;

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
    maxCost: byLimit,
    delays: never,
    wireQ: byQueue,
    resetIsNextAdmission: true,
    // Once counted, a window's end is the admission's resetMs.
    periodEnd: (_r, at, resetMs) => at + resetMs,
    expiryMoves: false,
    boundaries: (r) => (r.align === 'clock' && r.calendar === undefined ? r.windowMs : undefined),
    scaled: false,
    timeState: false,
    options: ['align', 'quota'],
    countsRefusals: always,
    readings: {},
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
    maxCost: byLimit,
    delays: never,
    wireQ: byQueue,
    resetIsNextAdmission: false,
    periodEnd: noPeriod,
    expiryMoves: false,
    boundaries: none,
    scaled: false,
    timeState: false,
    options: [],
    countsRefusals: always,
    readings: {},
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
    maxCost: byLimit,
    delays: never,
    wireQ: byQueue,
    resetIsNextAdmission: false,
    periodEnd: (r, at) => periodOf(at, r.windowMs),
    expiryMoves: false,
    boundaries: none,
    scaled: true,
    timeState: false,
    options: [],
    countsRefusals: always,
    readings: {},
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
    maxCost: (r) => r.burst,
    delays: never,
    wireQ: byQueue,
    resetIsNextAdmission: false,
    periodEnd: noPeriod,
    expiryMoves: true,
    boundaries: none,
    scaled: true,
    timeState: false,
    options: ['burst'],
    countsRefusals: always,
    readings: {},
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
    maxCost: (r) => (r.mode === 'queue' ? r.queue : r.burst),
    delays: (r) => r.mode === 'queue',
    wireQ: byQueue,
    resetIsNextAdmission: false,
    periodEnd: noPeriod,
    expiryMoves: false,
    boundaries: none,
    scaled: false,
    timeState: true,
    options: ['mode', 'burst', 'queue'],
    // A queue shapes: a refused request takes no place in it.
    countsRefusals: (r) => r.mode !== 'queue',
    readings: { 'leaky-meter': { mode: 'meter' }, 'leaky-queue': { mode: 'queue' } },
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
    maxCost: byLimit,
    delays: never,
    wireQ: (r) => r.buckets,
    resetIsNextAdmission: false,
    periodEnd: (r, at) => periodOf(at, r.windowMs / r.buckets),
    expiryMoves: false,
    boundaries: none,
    scaled: false,
    timeState: false,
    options: ['buckets'],
    countsRefusals: always,
    readings: {},
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

/**
 * Whether a rule of `def` in `mode` takes `option`: one of its options, and for a bucket with
 * two readings, burst in the meter (its capacity) and queue in the queue (its places).
 */
export function takesOption(def: AlgorithmDef, option: AlgorithmOption, mode: 'meter' | 'queue'): boolean {
  if (!def.options.includes(option)) return false;
  if (option === 'burst') return mode === 'meter';
  return option !== 'queue' || mode === 'queue';
}

/** Who takes `option`, for messages: `a token-bucket or leaky-bucket meter rule`. */
export function takersOf(option: AlgorithmOption): string {
  const reading = option === 'burst' ? ' meter' : option === 'queue' ? ' queue' : '';
  const names = ALGORITHM_NAMES.filter((a) => registry[a].options.includes(option)).map((a) =>
    registry[a].options.includes('mode') ? `${a}${reading}` : a,
  );
  return `a ${names.join(' or ')} rule`;
}
