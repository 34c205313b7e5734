/**
 * The client port: the few Redis operations the stores run, over whichever client the
 * app built. Two families fit, recognised by their shape (never by importing them, so
 * both stay optional peer dependencies):
 *
 * - ioredis (5, 6) and its fork iovalkey: `Redis` (standalone or Sentinel, `new Redis({
 *   sentinels, name })`) and `Cluster`. They have `evalshaBuffer` / `evalBuffer` (the
 *   Buffer-reply commands ioredis defines at runtime); a Cluster says `isCluster`.
 * - node-redis (the `redis` package, 5 and 6): `createClient`, `createCluster` and
 *   `createSentinel`, all driven through `sendCommand` with a type mapping that answers
 *   bulk strings as Buffers. A cluster has `masters` and `nodeClient`; a Sentinel client
 *   `getMasterNode`. Connecting (`await client.connect()`) stays the app's business.
 *
 * Everything client-specific (Buffer replies, routing by key on a Cluster, reaching every
 * master, how a Redis error reply is recognised, ioredis' auto-pipelining left out of the
 * store's calls) lives here; the script runner and the
 * stores only call a {@link RedisPort}.
 */

/** One Redis server or a Cluster, as the stores use it. */
export interface RedisPort {
  /** The client family, for messages and the docs' support matrix. */
  readonly family: 'ioredis' | 'node-redis';
  /** A Cluster: ops are routed by key slot, and a script or library is per master. */
  readonly cluster: boolean;
  /** `EVALSHA sha numkeys ...keys ...args`, bulk replies as Buffers; routed by `keys[0]`. */
  evalsha(sha: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /** `EVAL script numkeys ...keys ...args`, bulk replies as Buffers; routed by `keys[0]`. */
  eval(script: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /** `FCALL fn numkeys ...keys ...args`, bulk replies as Buffers; routed by `keys[0]`. */
  fcall(fn: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /**
   * Any other command (`FUNCTION LOAD`, `TIME`, `CONFIG GET`, `ZREM`...), replies as the
   * client decodes them by default (bulk strings as text). On a Cluster it goes to the node
   * of `key` when given, else to any node; use {@link masters} for every master.
   */
  command(args: readonly string[], key?: string): Promise<unknown>;
  /**
   * One port per master: the server itself when standalone; every master a Cluster knows
   * right now (for loading a library or script on each, or checking each one's settings).
   */
  masters(): Promise<RedisPort[]>;
  /** False when the client cannot send FCALL (an ioredis without `fcallBuffer`): scripts only. */
  readonly functions?: boolean;
  /**
   * Calls `listener` after each (re)connection, where the client tells (script.ts asks
   * again; checks.ts waits for the first); returns a function that removes it.
   */
  readonly onReconnect?: (listener: () => void) => () => void;
  /** Whether the client is connected now (a lazy client is left for the app to connect). */
  readonly connected?: () => boolean;
}

/** Type mapping of node-redis' RESP decoder: a blob string (`$`, type 36) as a Buffer. */
const BUFFERS = { typeMapping: { 36: Buffer } } as const;

type Fn = (...args: never[]) => unknown;
const isFn = (x: unknown): x is Fn => typeof x === 'function';

/** ioredis' `Command` (its options: reply encoding, the client's `keyPrefix`, a friendly stack). */
type IoredisCommand = new (
  name: string,
  args: readonly (string | number)[],
  options: { replyEncoding: null; keyPrefix: unknown; errorStack: Error | undefined },
) => object;

/** The ioredis / iovalkey calls the port makes (ioredis' typings leave the Buffer ones out). */
interface IoredisLike {
  evalshaBuffer(sha: string, numkeys: number, ...args: string[]): Promise<unknown>;
  evalBuffer(script: string, numkeys: number, ...args: string[]): Promise<unknown>;
  fcallBuffer?(fn: string, numkeys: number, ...args: string[]): Promise<unknown>;
  callBuffer(command: string, ...args: string[]): Promise<unknown>;
  call(command: string, ...args: string[]): Promise<unknown>;
  readonly isCluster?: boolean;
  nodes?(role: 'master'): IoredisLike[];
  on?(event: 'ready', listener: () => void): unknown;
  readonly status?: string;
  /** Sends a built command as it is: no auto-pipelining (see ioredisPort). */
  sendCommand?(command: object): Promise<unknown>;
  readonly options?: { readonly keyPrefix?: unknown; readonly showFriendlyErrorStack?: boolean };
}

/** The events and state a node-redis client or Sentinel client has. */
interface NodeRedisEvents {
  on?(event: string, listener: (event?: { type?: string }) => void): unknown;
  readonly isReady?: boolean;
}

interface NodeRedisOptions {
  readonly typeMapping: Record<number, unknown>;
}
/** node-redis standalone: `sendCommand(args, options)`. */
interface NodeRedisClient {
  sendCommand(args: readonly string[], options?: NodeRedisOptions): Promise<unknown>;
}
/** node-redis cluster: `sendCommand(firstKey, isReadonly, args, options)`, its masters. */
interface NodeRedisCluster {
  sendCommand(firstKey: string | undefined, isReadonly: boolean, args: readonly string[], options?: NodeRedisOptions): Promise<unknown>;
  readonly masters: readonly object[];
  nodeClient(node: object): Promise<NodeRedisClient> | NodeRedisClient;
}
/** node-redis Sentinel: `sendCommand(isReadonly, args, options)`, always to the master. */
interface NodeRedisSentinel {
  sendCommand(isReadonly: boolean, args: readonly string[], options?: NodeRedisOptions): Promise<unknown>;
}

function isIoredis(c: Record<string, unknown>): boolean {
  return isFn(c.evalshaBuffer) && isFn(c.evalBuffer) && isFn(c.callBuffer) && isFn(c.call);
}

/** One port per client: the script runner (script.ts) is kept per port, so per client. */
const ports = new WeakMap<object, RedisPort>();

/** The port over `client` (the same one for the same client), or undefined when it is neither client family. */
export function portOf(client: unknown): RedisPort | undefined {
  if ((typeof client !== 'object' && typeof client !== 'function') || client === null) return undefined;
  let port = ports.get(client);
  if (port === undefined) {
    port = withEvents(client, makePort(client));
    if (port !== undefined) ports.set(client, port);
  }
  return port;
}

/**
 * `onReconnect` and `connected` where the client tells: ioredis / iovalkey standalone,
 * Sentinel and Cluster ('ready' on every connection, `status`), node-redis standalone
 * ('ready', `isReady`), Sentinel (a 'topology-change' to a new master, `isReady`) and
 * cluster ('connect' once its slots are known; `isReady` on 6, an open client that knows
 * its masters on 5). A Cluster node restarted or replaced on its own is not a connection
 * of the client: its library is reloaded when FCALL says it is missing (see script.ts).
 */
function withEvents(client: object, port: RedisPort | undefined): RedisPort | undefined {
  if (port === undefined) return port;
  const c = client as NodeRedisEvents & IoredisLike;
  if (!isFn(c.on)) return port;
  const listeners = new Set<() => void>();
  const fire = (): void => {
    for (const l of [...listeners]) l();
  };
  const onReconnect = (listener: () => void): (() => void) => {
    // Each subscription its own entry, so that removing one leaves the others.
    const entry = (): void => listener();
    listeners.add(entry);
    return () => void listeners.delete(entry);
  };
  if (port.family === 'ioredis') {
    c.on('ready', fire);
    return { ...port, onReconnect, connected: () => c.status === 'ready' };
  }
  if (port.cluster) {
    const cl = client as NodeRedisEvents & { readonly isOpen?: boolean; readonly masters: readonly object[] };
    c.on('connect', fire);
    return { ...port, onReconnect, connected: () => cl.isReady ?? (cl.isOpen === true && cl.masters.length > 0) };
  }
  if (isFn((client as Record<string, unknown>).getMasterNode)) c.on('topology-change', (e) => void (e?.type === 'MASTER_CHANGE' && fire()));
  else c.on('ready', fire);
  return { ...port, onReconnect, connected: () => c.isReady === true };
}

function makePort(client: object): RedisPort | undefined {
  const c = client as Record<string, unknown>;
  if (isIoredis(c)) return ioredisPort(client as IoredisLike);
  if (!isFn(c.sendCommand)) return undefined;
  if (isFn(c.nodeClient) && 'masters' in c) return nodeRedisClusterPort(client as NodeRedisCluster);
  if (isFn(c.getMasterNode)) return nodeRedisSentinelPort(client as NodeRedisSentinel);
  // A standalone node-redis client (a `withTypeMapping` proxy of one too).
  if (isFn(c.withTypeMapping)) return nodeRedisPort(client as NodeRedisClient);
  return undefined;
}

/**
 * ioredis' `Command` class, as the client's own methods build it: one of them is called on
 * a stand-in that has auto-pipelining off and takes the command it is handed (nothing is
 * sent). The class is not reachable from the client otherwise (ioredis mixes
 * `EventEmitter` into `Redis.prototype`, `constructor` included), and importing ioredis
 * would need it installed and the very copy the app's client came from.
 */
function commandClass(c: IoredisLike): IoredisCommand | undefined {
  const method = (c as unknown as Record<string, unknown>).pingBuffer;
  if (!isFn(method)) return undefined;
  let made: object | undefined;
  const standIn = {
    options: { enableAutoPipelining: false, autoPipeliningIgnoredCommands: [] },
    isPipeline: true,
    sendCommand(command: object) {
      made = command;
      return Promise.resolve();
    },
  };
  try {
    (method as (this: unknown) => unknown).call(standIn);
  } catch {
    return undefined;
  }
  const Command = made?.constructor;
  return isFn(Command) && isFn((made as { toWritable?: unknown }).toWritable) ? (Command as unknown as IoredisCommand) : undefined;
}

/**
 * The script calls of a standalone ioredis / iovalkey client, each sent as a `Command`
 * through `sendCommand`, which is what the client's own methods do without
 * auto-pipelining: the same reply encoding (Buffers), key prefix and stack. With
 * `enableAutoPipelining`, a method would build a `Pipeline` per tick around the one call
 * the store sends per tick (it batches its own stacks) and defer its write to a
 * `process.nextTick` of its own: a tenth of the Node work of a decision alone in its tick,
 * for nothing. Undefined where the class cannot be had, and on a Cluster (whose
 * auto-pipelines are per node, and whose batching is off): the client's methods then.
 */
function directCalls(c: IoredisLike): Pick<RedisPort, 'evalsha' | 'eval' | 'fcall'> | undefined {
  if (c.isCluster === true || !isFn(c.sendCommand)) return undefined;
  const Cmd = commandClass(c);
  if (Cmd === undefined) return undefined;
  const send = (name: string, head: string, keys: readonly string[], args: readonly string[]): Promise<unknown> => {
    const o = c.options;
    const argv: (string | number)[] = new Array(2 + keys.length + args.length);
    argv[0] = head;
    argv[1] = keys.length;
    for (let i = 0; i < keys.length; i++) argv[2 + i] = keys[i] as string;
    for (let i = 0; i < args.length; i++) argv[2 + keys.length + i] = args[i] as string;
    // Looked up per call, as the client's own methods do (instrumentation patches it).
    return (c as Required<Pick<IoredisLike, 'sendCommand'>>).sendCommand(
      new Cmd(name, argv, {
        replyEncoding: null,
        keyPrefix: o?.keyPrefix,
        errorStack: o?.showFriendlyErrorStack === true ? new Error() : undefined,
      }),
    );
  };
  return {
    evalsha: (sha, keys, args) => send('evalsha', sha, keys, args),
    eval: (script, keys, args) => send('eval', script, keys, args),
    fcall: (fn, keys, args) => send('fcall', fn, keys, args),
  };
}

function ioredisPort(c: IoredisLike): RedisPort {
  const cluster = c.isCluster === true;
  const port: RedisPort = {
    family: 'ioredis',
    cluster,
    // Without fcallBuffer, FCALL would go through callBuffer, whose command name ioredis 5
    // and 6 drop under enableAutoPipelining: scripts only. (It is also where ioredis' command
    // table knows FCALL, which is what places a `keyPrefix` on a direct call.)
    functions: isFn(c.fcallBuffer),
    ...(directCalls(c) ?? methodCalls(c)),
    // ioredis routes `call` on a Cluster by the command's first key (FUNCTION LOAD has none:
    // any node).
    command: (args) => c.call(args[0] as string, ...args.slice(1)),
    masters: () => Promise.resolve(cluster && isFn(c.nodes) ? c.nodes('master').map(ioredisPort) : [port]),
  };
  return port;
}

/** The script calls through the client's own methods (a Cluster, or where `directCalls` cannot be had). */
function methodCalls(c: IoredisLike): Pick<RedisPort, 'evalsha' | 'eval' | 'fcall'> {
  return {
    // Spread into one argument list: ioredis writes an all-string command as one string.
    evalsha: (sha, keys, args) => c.evalshaBuffer(sha, keys.length, ...keys, ...args),
    eval: (script, keys, args) => c.evalBuffer(script, keys.length, ...keys, ...args),
    // fcallBuffer where ioredis has it: with enableAutoPipelining, ioredis 5 and 6 drop the
    // command name of a `callBuffer`.
    fcall: isFn(c.fcallBuffer)
      ? (fn, keys, args) => (c.fcallBuffer as Fn & IoredisLike['evalBuffer'])(fn, keys.length, ...keys, ...args)
      : (fn, keys, args) => c.callBuffer('FCALL', fn, String(keys.length), ...keys, ...args),
  };
}

function nodeRedisPort(c: NodeRedisClient): RedisPort {
  const port: RedisPort = {
    family: 'node-redis',
    cluster: false,
    evalsha: (sha, keys, args) => c.sendCommand(['EVALSHA', sha, String(keys.length), ...keys, ...args], BUFFERS),
    eval: (script, keys, args) => c.sendCommand(['EVAL', script, String(keys.length), ...keys, ...args], BUFFERS),
    fcall: (fn, keys, args) => c.sendCommand(['FCALL', fn, String(keys.length), ...keys, ...args], BUFFERS),
    command: (args) => c.sendCommand(args),
    masters: () => Promise.resolve([port]),
  };
  return port;
}

function nodeRedisSentinelPort(c: NodeRedisSentinel): RedisPort {
  const port: RedisPort = {
    family: 'node-redis',
    cluster: false,
    evalsha: (sha, keys, args) => c.sendCommand(false, ['EVALSHA', sha, String(keys.length), ...keys, ...args], BUFFERS),
    eval: (script, keys, args) => c.sendCommand(false, ['EVAL', script, String(keys.length), ...keys, ...args], BUFFERS),
    fcall: (fn, keys, args) => c.sendCommand(false, ['FCALL', fn, String(keys.length), ...keys, ...args], BUFFERS),
    command: (args) => c.sendCommand(false, args),
    masters: () => Promise.resolve([port]),
  };
  return port;
}

function nodeRedisClusterPort(c: NodeRedisCluster): RedisPort {
  // Scripts write: never sent to a replica (isReadonly false).
  return {
    family: 'node-redis',
    cluster: true,
    evalsha: (sha, keys, args) => c.sendCommand(keys[0], false, ['EVALSHA', sha, String(keys.length), ...keys, ...args], BUFFERS),
    eval: (script, keys, args) => c.sendCommand(keys[0], false, ['EVAL', script, String(keys.length), ...keys, ...args], BUFFERS),
    fcall: (fn, keys, args) => c.sendCommand(keys[0], false, ['FCALL', fn, String(keys.length), ...keys, ...args], BUFFERS),
    command: (args, key) => c.sendCommand(key, false, args),
    // A master whose client cannot be had (its connection failing) is left out, as a master
    // that does not answer is: the others are still reached.
    masters: async () => {
      const got = await Promise.allSettled(c.masters.map(async (m) => nodeRedisPort(await c.nodeClient(m))));
      return got.flatMap((g) => (g.status === 'fulfilled' ? [g.value] : []));
    },
  };
}

/** Constructor names of the two families' error replies (ioredis' redis-errors; node-redis). */
const REPLY_ERRORS = new Set(['ReplyError', 'ErrorReply']);

/**
 * The code word of a Redis error reply (`NOSCRIPT`, `BUSY`, `NOPERM`...), or undefined when
 * `err` is not an error reply. Redis error replies start with an upper-case code word;
 * both families hand the raw reply over as the message of their reply error class
 * (ioredis `ReplyError`, node-redis `ErrorReply` and its subclasses), found here by the
 * class names on the prototype chain. An arbitrary error's text is never searched.
 */
export function replyCode(err: unknown): string | undefined {
  if (!(err instanceof Error)) return undefined;
  let isReply = false;
  for (let p: object | null = Object.getPrototypeOf(err); p !== null && p !== Error.prototype; p = Object.getPrototypeOf(p)) {
    if (REPLY_ERRORS.has((p as { constructor: { name: string } }).constructor.name)) {
      isReply = true;
      break;
    }
  }
  if (!isReply) return undefined;
  const m = /^[A-Z][A-Z_]*(?=\s|$)/.exec(err.message);
  return m ? m[0] : undefined;
}
