/** The six algorithms by name. */
import type { AlgorithmName } from '../types.js';
import { fixedWindow, fixedWindowKernel } from './fixed-window.js';
import { leakyBucket, leakyBucketKernel } from './leaky-bucket.js';
import { slidingBuckets } from './sliding-buckets.js';
import { slidingLog } from './sliding-log.js';
import { slidingWindow, slidingWindowKernel } from './sliding-window.js';
import { tokenBucket, tokenBucketKernel } from './token-bucket.js';
import type { Algorithm, Kernel } from './types.js';

export const algorithms: Record<AlgorithmName, Algorithm> = {
  'fixed-window': fixedWindow,
  'sliding-log': slidingLog,
  'sliding-window': slidingWindow,
  'token-bucket': tokenBucket,
  'leaky-bucket': leakyBucket,
  'sliding-buckets': slidingBuckets,
};

/** The kernels of the algorithms whose states have a fixed width (sliding-log and sliding-buckets have none). */
export const kernels: Record<AlgorithmName, Kernel | undefined> = {
  'fixed-window': fixedWindowKernel,
  'sliding-log': undefined,
  'sliding-window': slidingWindowKernel,
  'token-bucket': tokenBucketKernel,
  'leaky-bucket': leakyBucketKernel,
  'sliding-buckets': undefined,
};

export type { Algorithm, Check, Kernel, State } from './types.js';
export { Verdict } from './types.js';
