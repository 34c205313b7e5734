/**
 * Running the store script: EVALSHA first; on a `NOSCRIPT` reply, and
 * only on that, EVAL with the full source, which runs the script and caches it on the
 * node that answered (the port routes both commands by the first key, so on a Cluster it
 * is the node that owns the slot). That is the "load and retry once".
 *
 * The reply is recognised by its error code (`replyCode`, client.ts): the first word of a
 * Redis error reply, never a search of an arbitrary error's text. ioredis' own
 * `defineCommand` searches the message for "NOSCRIPT" anywhere, so it is not used.
 */
import type { RedisPort } from './client.js';
import { replyCode } from './client.js';
import { STORE_SCRIPT, STORE_SCRIPT_SHA } from './lua/index.js';

export { replyCode };

/**
 * The client a store takes: an ioredis (5, 6) or iovalkey `Redis` or `Cluster`, or a
 * node-redis (5, 6) client, cluster or Sentinel client (see client.ts). Structural and
 * loose on purpose: every client of either family, in any reply mode, fits, and neither
 * package has to be installed for the types to resolve.
 */
export type RedisClientLike = object;

/** Runs the store script: `call.keys` and `call.args` (see args.ts). */
export function runScript(port: RedisPort, call: { readonly keys: readonly string[]; readonly args: readonly string[] }): Promise<unknown> {
  const { keys, args } = call;
  return port.evalsha(STORE_SCRIPT_SHA, keys, args).catch((err: unknown) => {
    if (replyCode(err) !== 'NOSCRIPT') throw err;
    return port.eval(STORE_SCRIPT, keys, args);
  });
}
