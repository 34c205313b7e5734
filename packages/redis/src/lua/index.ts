/**
 * The server-side code every store call runs, assembled two ways from the same sections
 * (the prelude, the call's state and parsing, one section per algorithm, the stack logic):
 *
 * - `STORE_LIBRARY`, a Redis function library (`FUNCTION LOAD`, then `FCALL`): Redis
 *   compiles it once and, on the first call, its definitions are built and kept, so a call
 *   runs only the entry function. Its name carries a hash of its source
 *   (`tollgate_<hash>`), and so do its functions (function names are global in Redis): two
 *   versions of the application can share a server during a rolling deploy, each calling
 *   its own. It also holds the concurrency slots' function.
 * - `STORE_SCRIPT`, the same code as one Lua script (`EVALSHA`), for servers without
 *   functions or where they are refused. Redis runs a script's whole body on every call,
 *   so every function it defines is a new closure each time: each algorithm's section is
 *   wrapped in `if NEED[code]`, and a call instantiates only the algorithms its rules use.
 *
 * Redis 7.0 runs a library's top level without the Lua standard libraries (`string`,
 * `math`, `struct` are missing until a function is called), hence the definitions are
 * built by the first call rather than at load.
 */
import { createHash } from 'node:crypto';
import { COMMON_LUA } from './common.js';
import { FIXED_WINDOW_LUA } from './fixed-window.js';
import { KEYOPS_LUA } from './keyops.js';
import { LEAKY_BUCKET_LUA } from './leaky-bucket.js';
import { LEASE_LUA } from './lease.js';
import { ONE_LUA } from './one.js';
import { SLIDING_BUCKETS_LUA } from './sliding-buckets.js';
import { SLIDING_LOG_LUA } from './sliding-log.js';
import { SLIDING_WINDOW_LUA } from './sliding-window.js';
import { SLOT_SCRIPT } from './slots.js';
import { ENTRY_LUA, PARSE_LUA, STACK_LUA } from './stack.js';
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

/**
 * `init(NEED, NEED_MONTH)`: builds every definition (the algorithms in NEED, calendar
 * months when NEED_MONTH) and returns the entry `store(KEYS, ARGV)` and the table of the
 * common calls' closures by plan (one.ts); `tail` ends it. The library's also builds the
 * operations by key over the same definitions (one copy of the algorithms in its heap,
 * which each of Redis' garbage collection steps traverses) and returns their entry too.
 */
function initOf(name: string, tail: readonly string[]): string {
  return [
    `local function ${name}(NEED, NEED_MONTH)`,
    'local ALG = {}',
    COMMON_LUA,
    PARSE_LUA,
    section('f', FIXED_WINDOW_LUA),
    section('s', SLIDING_LOG_LUA),
    section('w', SLIDING_WINDOW_LUA),
    section('t', TOKEN_BUCKET_LUA),
    section('k', LEAKY_BUCKET_LUA),
    section('b', SLIDING_BUCKETS_LUA),
    STACK_LUA,
    ONE_LUA,
    LEASE_LUA,
    ENTRY_LUA,
    ...tail,
    'end',
  ].join('\n');
}

const INIT = initOf('init', ['return store, FAST']);
const LIBRARY_INIT = initOf('init', [KEYOPS_LUA, 'return store, FAST, keyop']);

/**
 * Which algorithms a script call's rules use (the first flag of each rule line of its
 * plan), and whether one counts months.
 */
const NEED_OF_ARGV = `
local NEED, NEED_MONTH = {}, false
local nr, j = nil, 0
for line in string.gmatch(ARGV[1], '[^\\n]+') do
  if nr == nil then nr = tonumber(string.match(line, '(%d+)$'))
  elseif j < nr then
    j = j + 1
    NEED[string.sub(line, 1, 1)] = true
    if string.byte(line, 4) == 109 then NEED_MONTH = true end
  else break end
end`;

export const STORE_SCRIPT = [INIT, NEED_OF_ARGV, 'return (init(NEED, NEED_MONTH))(KEYS, ARGV)'].join('\n');

/**
 * `init_keys(NEED, NEED_MONTH)`: the operations by key (keyops.ts) over the prelude and the
 * algorithms in NEED; returns the entry `keyop(KEYS, ARGV)`.
 */
const KEYS_INIT = [
  'local function init_keys(NEED, NEED_MONTH)',
  'local ALG = {}',
  COMMON_LUA,
  section('f', FIXED_WINDOW_LUA),
  section('s', SLIDING_LOG_LUA),
  section('w', SLIDING_WINDOW_LUA),
  section('t', TOKEN_BUCKET_LUA),
  section('k', LEAKY_BUCKET_LUA),
  section('b', SLIDING_BUCKETS_LUA),
  KEYOPS_LUA,
  'return keyop',
  'end',
].join('\n');

/** The operations by key as one Lua script (`EVALSHA`): only the rule's algorithm is built. */
export const KEYS_SCRIPT = [
  KEYS_INIT,
  'local NEED = { [string.sub(ARGV[1], 1, 1)] = true }',
  'return init_keys(NEED, string.byte(ARGV[1], 4) == 109)(KEYS, ARGV)',
].join('\n');

export const KEYS_SCRIPT_SHA = createHash('sha1').update(KEYS_SCRIPT).digest('hex');

export const STORE_SCRIPT_SHA = createHash('sha1').update(STORE_SCRIPT).digest('hex');

/** The library's body, before its name is known (the name is a hash of it). */
function libraryBody(storeFn: string, slotsFn: string, keysFn: string): string {
  return [
    LIBRARY_INIT,
    'local ALL = { f = true, s = true, w = true, t = true, k = true, b = true }',
    // The common calls' closures (one.ts) are looked up here, one Lua call fewer.
    'local store, FAST, keyop = nil, nil, nil',
    `redis.register_function('${storeFn}', function(keys, args)`,
    '  if store == nil then store, FAST, keyop = init(ALL, true) end',
    '  local f = FAST[args[1]]',
    '  if f then return f(keys, args) end',
    '  return store(keys, args)',
    'end)',
    `redis.register_function('${slotsFn}', function(KEYS, ARGV)`,
    SLOT_SCRIPT,
    'end)',
    `redis.register_function('${keysFn}', function(keys, args)`,
    '  if keyop == nil then store, FAST, keyop = init(ALL, true) end',
    '  return keyop(keys, args)',
    'end)',
  ].join('\n');
}

/** The library's version: a hash of its source, whatever the function names will be. */
const VERSION = createHash('sha1')
  .update(libraryBody('S', 'L', 'K'))
  .digest('hex')
  .slice(0, 16);

/** The library's name: `tollgate_<hash of its source>`. */
export const STORE_LIBRARY_NAME = `tollgate_${VERSION}`;
/** The library's function that decides, peeks and refunds (`FCALL <name> numkeys ...`). */
export const STORE_FUNCTION = `${STORE_LIBRARY_NAME}_store`;
/** The library's function behind the concurrency slots. */
export const SLOTS_FUNCTION = `${STORE_LIBRARY_NAME}_slots`;
/** The library's function behind the operations by key (get, block, unblock, penalize, reward). */
export const KEYS_FUNCTION = `${STORE_LIBRARY_NAME}_keys`;

/** The library as `FUNCTION LOAD` takes it, for operators who load it themselves. */
export const STORE_LIBRARY = `#!lua name=${STORE_LIBRARY_NAME}\n${libraryBody(STORE_FUNCTION, SLOTS_FUNCTION, KEYS_FUNCTION)}`;
