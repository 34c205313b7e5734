/**
 * The one script every store call runs: the prelude, the argument parsing, one section
 * per algorithm and the stack logic. One script (rather than one per algorithm) so that a
 * stack mixing algorithms is still one EVALSHA; its SHA-1 is computed once at load.
 *
 * Redis runs the whole script body on every call, so every function it defines is a new
 * closure each time. Each algorithm's section is therefore wrapped in `if NEED[code]`:
 * a call instantiates only the algorithms its rules use.
 */
import { createHash } from 'node:crypto';
import { COMMON_LUA } from './common.js';
import { FIXED_WINDOW_LUA } from './fixed-window.js';
import { LEAKY_BUCKET_LUA } from './leaky-bucket.js';
import { SLIDING_LOG_LUA } from './sliding-log.js';
import { SLIDING_WINDOW_LUA } from './sliding-window.js';
import { PARSE_LUA, STACK_LUA } from './stack.js';
import { TOKEN_BUCKET_LUA } from './token-bucket.js';

/**
 * Reply fields (doubles) per op: 1 when admitted, else the refusal's reason code (2 limit,
 * 3 blocked, 4 cost above maxCost); remaining; resetMs; then delayMs when admitted or
 * retryAfterMs when refused (the other is 0).
 */
export const OUT_FIELDS = 4;

function section(code: string, lua: string): string {
  return `if NEED['${code}'] then\n${lua}\nend`;
}

export const STORE_SCRIPT = [
  'local ALG = {}',
  COMMON_LUA,
  PARSE_LUA,
  section('f', FIXED_WINDOW_LUA),
  section('s', SLIDING_LOG_LUA),
  section('w', SLIDING_WINDOW_LUA),
  section('t', TOKEN_BUCKET_LUA),
  section('k', LEAKY_BUCKET_LUA),
  STACK_LUA,
].join('\n');

export const STORE_SCRIPT_SHA = createHash('sha1').update(STORE_SCRIPT).digest('hex');
