/**
 * Running the store script: EVALSHA first; on a `NOSCRIPT` reply, and
 * only on that, EVAL with the full source, which runs the script and caches it on the
 * node that answered (ioredis routes both commands by the first key, so on a Cluster it
 * is the node that owns the slot). That is the "load and retry once".
 *
 * The reply is recognised by its error code: Redis error replies start with an
 * upper-case code word (`NOSCRIPT No matching script...`), which ioredis hands over as a
 * `ReplyError` whose message is the raw reply. We read that first word of a ReplyError,
 * never search an arbitrary error's text. ioredis' own `defineCommand` searches the
 * message for "NOSCRIPT" anywhere, so it is not used.
 */
import { ReplyError } from 'ioredis';
import { STORE_SCRIPT, STORE_SCRIPT_SHA } from './lua/index.js';

/**
 * The part of an ioredis `Redis` or `Cluster` the store calls. Structural, so clients of
 * ioredis 5 and 6 (and their generic reply modes) all fit. The store also calls the
 * Buffer-reply variants `evalshaBuffer` and `evalBuffer` (its decide reply is binary),
 * which every ioredis client has but ioredis' typings leave out (see BufferScripts).
 */
export interface RedisClientLike {
  evalsha(sha: string, numkeys: number, ...args: (string | Buffer)[]): Promise<unknown>;
  eval(script: string, numkeys: number, ...args: (string | Buffer)[]): Promise<unknown>;
  del(...keys: string[]): Promise<number>;
  /** Set by ioredis: `true` on a Cluster. */
  readonly isCluster?: boolean;
}

type ScriptClient = RedisClientLike;

/**
 * ioredis defines `<command>Buffer` for every command at runtime. Not `callBuffer`: with
 * `enableAutoPipelining` ioredis 5 and 6 drop its command name.
 */
interface BufferScripts {
  evalshaBuffer(sha: string, numkeys: number, ...args: string[]): Promise<unknown>;
  evalBuffer(script: string, numkeys: number, ...args: string[]): Promise<unknown>;
}

/** Whether `client` has the Buffer-reply script commands the store runs. */
export function hasBufferScripts(client: object): boolean {
  const c = client as Partial<BufferScripts>;
  return typeof c.evalshaBuffer === 'function' && typeof c.evalBuffer === 'function';
}

/** The code word of a Redis error reply, or undefined when `err` is not a reply error. */
export function replyCode(err: unknown): string | undefined {
  if (!(err instanceof Error)) return undefined;
  const isReply = err instanceof (ReplyError as ErrorConstructor) || (err as Error).name === 'ReplyError';
  if (!isReply) return undefined;
  const m = /^[A-Z][A-Z_]*(?=\s|$)/.exec((err as Error).message);
  return m ? m[0] : undefined;
}

/** Runs the store script: `call.keys` and `call.args` (see args.ts). */
export function runScript(
  client: ScriptClient,
  call: { readonly keys: readonly string[]; readonly args: readonly string[] },
): Promise<unknown> {
  const { keys, args } = call;
  const c = client as ScriptClient & BufferScripts;
  return c.evalshaBuffer(STORE_SCRIPT_SHA, keys.length, ...keys, ...args).catch((err: unknown) => {
    if (replyCode(err) !== 'NOSCRIPT') throw err;
    return c.evalBuffer(STORE_SCRIPT, keys.length, ...keys, ...args);
  });
}
