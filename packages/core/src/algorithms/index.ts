/** The five algorithms by name. */
import type { AlgorithmName } from '../types.js';
import { fixedWindow } from './fixed-window.js';
import { leakyBucket } from './leaky-bucket.js';
import { slidingLog } from './sliding-log.js';
import { slidingWindow } from './sliding-window.js';
import { tokenBucket } from './token-bucket.js';
import type { Algorithm } from './types.js';

export const algorithms: Record<AlgorithmName, Algorithm> = {
  'fixed-window': fixedWindow,
  'sliding-log': slidingLog,
  'sliding-window': slidingWindow,
  'token-bucket': tokenBucket,
  'leaky-bucket': leakyBucket,
};

export type { Algorithm, Check, State } from './types.js';
