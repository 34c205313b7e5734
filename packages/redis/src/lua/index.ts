/**
 * The server-side code every store call runs (its Lua in packages/redis/lua, compiled into
 * generated.ts by scripts/generate-lua.mjs), assembled two ways from the same sections
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
import { ALGORITHM_NAMES, registry } from '@tollgate/core';
import * as LUA from './generated.js';
import {
  ENTRY_LUA,
  KEYOPS_LUA,
  KEYS_SCRIPT_ENTRY_LUA,
  LEASE_LUA,
  LIBRARY_LUA,
  ONE_LUA,
  OPS_LUA,
  PARSE_LUA,
  PRELUDE_LUA,
  SCRIPT_ENTRY_LUA,
  STACK_LUA,
} from './generated.js';

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
 * Each algorithm's section, in the registry's order: its kernel file `lua/<name>.lua`
 * (generated as `<NAME>_LUA`) under its wire code.
 */
const ALGORITHM_SECTIONS = ALGORITHM_NAMES.map((a) => {
  const lua = (LUA as Record<string, string | undefined>)[`${a.replace(/-/g, '_').toUpperCase()}_LUA`];
  if (lua === undefined) throw new Error(`@tollgate/redis: no Lua kernel for the algorithm ${a} (packages/redis/lua/${a}.lua)`);
  return section(registry[a].code, lua);
});

/**
 * `init(NEED, NEED_MONTH)`: builds every definition (the algorithms in NEED, calendar
 * months when NEED_MONTH) and returns the entry `store(KEYS, ARGV)` and the table of the
 * decide plans' closures by plan text (one.lua); `tail` ends it. The library's also builds the
 * operations by key over the same definitions (one copy of the algorithms in its heap,
 * which each of Redis' garbage collection steps traverses) and returns their entry too.
 */
function initOf(name: string, tail: readonly string[]): string {
  return [
    `local function ${name}(NEED, NEED_MONTH)`,
    'local ALG = {}',
    PRELUDE_LUA,
    PARSE_LUA,
    ...ALGORITHM_SECTIONS,
    OPS_LUA,
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

export const STORE_SCRIPT = [INIT, SCRIPT_ENTRY_LUA].join('\n');

/**
 * `init_keys(NEED, NEED_MONTH)`: the operations by key (keyops.lua) over the prelude, the rule parser and the
 * algorithms in NEED; returns the entry `keyop(KEYS, ARGV)`.
 */
const KEYS_INIT = [
  'local function init_keys(NEED, NEED_MONTH)',
  'local ALG = {}',
  PRELUDE_LUA,
  PARSE_LUA,
  ...ALGORITHM_SECTIONS,
  KEYOPS_LUA,
  'return keyop',
  'end',
].join('\n');

/** The operations by key as one Lua script (`EVALSHA`): only the rule's algorithm is built. */
export const KEYS_SCRIPT = [KEYS_INIT, KEYS_SCRIPT_ENTRY_LUA].join('\n');

export const KEYS_SCRIPT_SHA = createHash('sha1').update(KEYS_SCRIPT).digest('hex');

export const STORE_SCRIPT_SHA = createHash('sha1').update(STORE_SCRIPT).digest('hex');

/** The library builds every algorithm: `ALL`, each wire code of the registry (library.lua). */
const ALL = `local ALL = { ${ALGORITHM_NAMES.map((a) => `${registry[a].code} = true`).join(', ')} }`;

/** The library's body, before its name is known (the name is a hash of it). */
function libraryBody(storeFn: string, slotsFn: string, keysFn: string): string {
  const fns = LIBRARY_LUA.replace("'STORE_FN'", `'${storeFn}'`).replace("'SLOTS_FN'", `'${slotsFn}'`).replace("'KEYS_FN'", `'${keysFn}'`);
  return [LIBRARY_INIT, ALL, fns].join('\n');
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
