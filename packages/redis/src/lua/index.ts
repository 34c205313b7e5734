/**
 * The one script every store call runs: the prelude, one section per algorithm and the
 * stack logic. One script (rather than one per algorithm) so that a stack mixing
 * algorithms is still one EVALSHA; its SHA-1 is computed once at load.
 */
import { createHash } from 'node:crypto';
import { COMMON_LUA } from './common.js';
import { FIXED_WINDOW_LUA } from './fixed-window.js';
import { LEAKY_BUCKET_LUA } from './leaky-bucket.js';
import { SLIDING_LOG_LUA } from './sliding-log.js';
import { SLIDING_WINDOW_LUA } from './sliding-window.js';
import { STACK_LUA } from './stack.js';
import { TOKEN_BUCKET_LUA } from './token-bucket.js';

/** ARGV fields per op: 12 describing the rule, then the cost. */
export const OP_FIELDS = 13;
/** ARGV fields before the first op: command, now, at, least TTL on supplied time. */
export const HEAD_FIELDS = 4;
/** Reply fields per op: allowed, remaining, resetMs, retryAfterMs, delayMs, reason. */
export const OUT_FIELDS = 6;

export const STORE_SCRIPT = [
  `local OP_FIELDS, HEAD_FIELDS = ${OP_FIELDS}, ${HEAD_FIELDS}`,
  'local ALG = {}',
  COMMON_LUA,
  FIXED_WINDOW_LUA,
  SLIDING_LOG_LUA,
  SLIDING_WINDOW_LUA,
  TOKEN_BUCKET_LUA,
  LEAKY_BUCKET_LUA,
  STACK_LUA,
].join('\n');

export const STORE_SCRIPT_SHA = createHash('sha1').update(STORE_SCRIPT).digest('hex');
