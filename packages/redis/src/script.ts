/**
 * Running the server-side code: as a function of the versioned library
 * (`FCALL`) where the server has functions and lets this client use them, else as a Lua
 * script (`EVALSHA`; on a `NOSCRIPT` reply, and only on that, `EVAL` with the full source,
 * which runs it and caches it on the node that answered).
 *
 * Which of the two is chosen once per connection (standalone) or per Cluster, not per
 * call: when a store is made (else at the first call) the library is loaded on the
 * client's server, on every master of a Cluster (`FUNCTION LOAD REPLACE`). A server that
 * refuses it with an error reply (`ERR`: no such command, as on Redis 6; `NOPERM`: an ACL)
 * and does not list it either (`FUNCTION LIST LIBRARYNAME <name>`: an operator may have
 * loaded it) gets scripts. A reconnection asks again.
 *
 * A library lost later (a restart, `FUNCTION FLUSH`, a new master) makes `FCALL` reply
 * `ERR`. That code alone does not say why: on an `ERR` the servers are asked again
 * (listed first), and the call is retried when the library had to be loaded, or when the
 * reply was exactly `ERR Function not found` (another instance on the same server may
 * have loaded it again in between: several instances meet the same flush). A call that
 * met a missing function ran nothing, so the retry counts once; any other `ERR` with the
 * library present was the call's own and is passed on. An `FCALL` refused with `NOPERM`
 * switches the client to scripts.
 *
 * Every client family goes through its port (client.ts): ioredis, iovalkey and node-redis
 * alike take the FCALL path. Replies are recognised by their error code (`replyCode`,
 * client.ts): the first word of a Redis error reply, never a search of an arbitrary
 * error's text. ioredis' own `defineCommand` searches the message for "NOSCRIPT" anywhere,
 * so it is not used.
 */
import { portOf, type RedisPort, replyCode } from './client.js';
import {
  KEYS_FUNCTION,
  KEYS_SCRIPT,
  KEYS_SCRIPT_SHA,
  SLOTS_FUNCTION,
  STORE_FUNCTION,
  STORE_LIBRARY,
  STORE_LIBRARY_NAME,
  STORE_SCRIPT,
  STORE_SCRIPT_SHA,
} from './lua/index.js';
import { SLOT_SCRIPT, SLOT_SCRIPT_SHA } from './lua/slots.js';

export { replyCode };

/**
 * The client a store takes: an ioredis (5, 6) or iovalkey `Redis` or `Cluster`, or a
 * node-redis (5, 6) client, cluster or Sentinel client (see client.ts). Structural and
 * loose on purpose: every client of either family, in any reply mode, fits, and neither
 * package has to be installed for the types to resolve.
 */
export type RedisClientLike = object;

/** One piece of server-side code, in its two forms: the library's function and the script. */
export interface ServerCode {
  /** Its function in the library (`FCALL <fn>`). */
  readonly fn: string;
  /** The same code as a Lua script, and the script's SHA-1. */
  readonly script: string;
  readonly sha: string;
}

/** Decide, peek and refund (see lua/parse.lua). */
export const STORE_CODE: ServerCode = { fn: STORE_FUNCTION, script: STORE_SCRIPT, sha: STORE_SCRIPT_SHA };
/** The concurrency slots' acquire, renew and count (see lua/slots.lua). */
export const SLOTS_CODE: ServerCode = { fn: SLOTS_FUNCTION, script: SLOT_SCRIPT, sha: SLOT_SCRIPT_SHA };

/** The operations by key (see lua/keyops.lua). */
export const KEYS_CODE: ServerCode = { fn: KEYS_FUNCTION, script: KEYS_SCRIPT, sha: KEYS_SCRIPT_SHA };

/** How calls are sent: not chosen yet, `FCALL`, or `EVALSHA`. */
type Mode = 'unknown' | 'functions' | 'scripts';

/** What one server answered about the library. */
type NodeAnswer = 'present' | 'loaded' | 'refused';

/**
 * How long one server may take to answer about the library before it is left out of the
 * choice (as a server that is down is): a master that stopped answering must not hold up
 * loading the library on the others, nor every call that waits for the choice.
 */
export const PROBE_TIMEOUT_MS = 1000;

/** `p`, or a rejection once `ms` have passed without an answer. */
function bounded<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer about the function library within ${ms} ms`)), ms);
    timer.unref?.();
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/**
 * How many times one call is sent again after meeting a missing library (each time
 * reloaded, or found reloaded by another instance): a library flushed again and again
 * while the call is retried ends with the error, within the store's deadline anyway.
 */
const RELOAD_RETRIES = 3;

/**
 * Whether `err` is the reply of an `FCALL` naming a function the server does not have:
 * `ERR Function not found`, as Redis 7+ and Valkey answer it, matched whole (an `ERR` of a
 * running function, a Lua error, has other text). The only reply whose text is read: the
 * code `ERR` alone cannot tell it from the call's own error once another instance has
 * loaded the library again.
 */
function functionMissing(err: unknown): boolean {
  return replyCode(err) === 'ERR' && /^ERR Function not found$/.test((err as Error).message);
}

/** Error codes of a server that will not run functions for this client. */
const REFUSALS = new Set(['ERR', 'NOPERM']);

/** `FUNCTION LIST` on one server: whether the library is there, undefined if refused. */
async function listed(node: RedisPort): Promise<boolean | undefined> {
  try {
    const libs = await node.command(['FUNCTION', 'LIST', 'LIBRARYNAME', STORE_LIBRARY_NAME]);
    return Array.isArray(libs) && libs.length > 0;
  } catch (err) {
    if (!REFUSALS.has(replyCode(err) ?? '')) throw err;
    return undefined;
  }
}

/** `FUNCTION LOAD REPLACE` on one server: whether it loaded (false: refused). */
async function load(node: RedisPort): Promise<boolean> {
  try {
    await node.command(['FUNCTION', 'LOAD', 'REPLACE', STORE_LIBRARY]);
    return true;
  } catch (err) {
    if (!REFUSALS.has(replyCode(err) ?? '')) throw err;
    return false;
  }
}

/**
 * The library on one server: loaded now, there already, or refused (neither loaded nor
 * listed). When the mode is first chosen it is loaded first, so the usual case is one
 * round trip (the name is the version: replacing a library of that name replaces it with
 * itself). After an `ERR` from FCALL it is listed first, so that an error of the call's
 * own, with the library there, is not taken for a lost library. Other errors reject.
 */
async function ensureLibrary(node: RedisPort, listFirst: boolean): Promise<NodeAnswer> {
  if (listFirst && (await listed(node)) === true) return 'present';
  if (await load(node)) return 'loaded';
  if (!listFirst && (await listed(node)) === true) return 'present';
  return 'refused';
}

/**
 * Runs server-side code through one client (shared by every store on it, see `runnerOf`):
 * `call(code, keys, args)` picks `FCALL` or `EVALSHA` as chosen for the connection.
 */
export class ScriptRunner {
  readonly #port: RedisPort;
  #mode: Mode;
  #probing: Promise<Mode> | undefined;
  /** How many times the library was loaded: a call that failed before a load retries. */
  #loads = 0;

  /** `functions: false`: the client cannot send FCALL, scripts only. */
  constructor(port: RedisPort, functions = true) {
    this.#port = port;
    this.#mode = functions ? 'unknown' : 'scripts';
    if (functions)
      port.onReconnect?.(() => {
        // The first connection of a client made before it was connected chooses now; a
        // reconnection asks again.
        if (this.#probing === undefined) this.#mode = 'unknown';
        this.prepare();
      });
  }

  /**
   * Chooses the mode now rather than at the first call, so that the first decision pays
   * no extra round trip (a failure here is left to that call to meet again).
   */
  prepare(): void {
    if (this.#mode === 'unknown' && this.#port.connected?.() !== false) this.#probe().catch(() => undefined);
  }

  /** `'functions'` or `'scripts'` once chosen; `'unknown'` before the first call. */
  get mode(): Mode {
    return this.#mode;
  }

  call(code: ServerCode, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    if (this.#mode === 'functions') return this.#fcall(code, keys, args);
    if (this.#mode === 'scripts') return this.#script(code, keys, args);
    return this.#probe().then((mode) => (mode === 'functions' ? this.#fcall(code, keys, args) : this.#script(code, keys, args)));
  }

  #script(code: ServerCode, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    return this.#port.evalsha(code.sha, keys, args).catch((err: unknown) => {
      if (replyCode(err) !== 'NOSCRIPT') throw err;
      return this.#port.eval(code.script, keys, args);
    });
  }

  #fcall(code: ServerCode, keys: readonly string[], args: readonly string[], retries = RELOAD_RETRIES): Promise<unknown> {
    const loads = this.#loads;
    const port = this.#port;
    return port.fcall(code.fn, keys, args).catch(async (err: unknown) => {
      const reply = replyCode(err);
      if (reply === 'NOPERM') {
        // FCALL itself is refused to this client: scripts from now on.
        this.#mode = 'scripts';
        return this.#script(code, keys, args);
      }
      if (reply !== 'ERR') throw err;
      const missing = functionMissing(err);
      // A load since this call was sent (another call's): the library is there now.
      if (this.#loads === loads) {
        const mode = await this.#probe(true);
        if (mode === 'scripts') return this.#script(code, keys, args);
        // The library was on every server: the error is the call's own, unless the server
        // said the function was missing (another instance has loaded it again since).
        if (this.#loads === loads && !missing) throw err;
      }
      // A call that met a missing function ran nothing; a flush may come again meanwhile.
      if (retries === 0) throw err;
      return this.#fcall(code, keys, args, retries - 1);
    });
  }

  /**
   * Chooses the mode (shared by the calls that ask while it runs). `again`: ask even when
   * chosen. A Cluster that does not know its masters yet gets scripts for now.
   */
  #probe(again = false): Promise<Mode> {
    if (!again && this.#mode !== 'unknown') return Promise.resolve(this.#mode);
    if (this.#probing === undefined) {
      this.#probing = this.#choose(again).finally(() => {
        this.#probing = undefined;
      });
    }
    return this.#probing;
  }

  /** Asks every server (see ensureLibrary) and sets the mode; see #probe. */
  async #choose(again: boolean): Promise<Mode> {
    const nodes = await this.#port.masters();
    // A Cluster that knows no master yet: scripts for now, asked again next time.
    if (nodes.length === 0) return 'scripts';
    const answers = await Promise.allSettled(nodes.map((n) => bounded(ensureLibrary(n, again), PROBE_TIMEOUT_MS)));
    const known = answers.filter((a) => a.status === 'fulfilled').map((a) => a.value);
    // Every server failed to answer (down, loading, silent past PROBE_TIMEOUT_MS): nothing is chosen.
    if (known.length === 0) throw (answers[0] as PromiseRejectedResult).reason;
    if (known.includes('loaded')) this.#loads++;
    this.#mode = known.includes('refused') ? 'scripts' : 'functions';
    return this.#mode;
  }
}

/** The runner of each port (portOf gives one port per client, so one runner per client). */
const runners = new WeakMap<RedisPort, ScriptRunner>();

/** The runner of `port`, made on first use and shared by every store on its client. */
export function runnerOf(port: RedisPort): ScriptRunner {
  let r = runners.get(port);
  if (r === undefined) {
    r = new ScriptRunner(port, port.functions !== false);
    runners.set(port, r);
  }
  return r;
}

/** The runner of `client`'s port (see portOf), or undefined when it is neither client family. */
export function runnerOfClient(client: unknown): ScriptRunner | undefined {
  const port = portOf(client);
  return port === undefined ? undefined : runnerOf(port);
}

/** Runs the store's code (decide, peek, refund): `call.keys` and `call.args` (see args.ts). */
export function runScript(port: RedisPort, call: { readonly keys: readonly string[]; readonly args: readonly string[] }): Promise<unknown> {
  return runnerOf(port).call(STORE_CODE, call.keys, call.args);
}

/** Runs one operation by key (lua/keyops.lua) on the node of `keys` (the entry, and an id's mark). */
export function runKeyOp(port: RedisPort, keys: readonly string[], args: readonly string[]): Promise<unknown> {
  return runnerOf(port).call(KEYS_CODE, keys, args);
}
