/**
 * The two ways RedisStore runs its code, for suites that must pass on both: a function of
 * the versioned library (`FCALL`, where the server has functions) and the Lua script
 * (`EVALSHA`), which the store falls back to where `FUNCTION` is refused. The fallback is
 * reached as on a managed service: a real ACL user that may run everything but `FUNCTION`.
 */
import { rawCommand } from './redis.js';

export type RunPath = 'functions' | 'scripts';
export const RUN_PATHS: readonly RunPath[] = ['functions', 'scripts'];

const SCRIPTS_USER = 'tollgate-scripts';
const SCRIPTS_PASSWORD = 'scripts-only';

/** Adds, on the server at `port`, the user whose clients get scripts: `-function` in its ACL. */
export async function addScriptsUser(port: number): Promise<void> {
  const reply = await rawCommand(port, `ACL SETUSER ${SCRIPTS_USER} on >${SCRIPTS_PASSWORD} ~* &* +@all -function`);
  if (!reply.startsWith('+OK')) throw new Error(`ACL SETUSER on ${port}: ${reply}`);
}

/** ioredis options logging in as the scripts user (none for functions: the default user). */
export function loginFor(path: RunPath): { username?: string; password?: string } {
  return path === 'scripts' ? { username: SCRIPTS_USER, password: SCRIPTS_PASSWORD } : {};
}

/**
 * FCALL and EVALSHA calls a server has run without an error so far (its INFO
 * commandstats: calls less failed_calls). A store on the script path may send an FCALL or
 * two while the library is being loaded; those fail and run nothing.
 */
export async function scriptCalls(node: { info(section: 'commandstats'): Promise<string> }): Promise<{ fcall: number; evalsha: number }> {
  const info = await node.info('commandstats');
  const count = (cmd: string) => {
    const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+)[^\\r\\n]*?failed_calls=(\\d+)`).exec(info);
    return m ? Number(m[1]) - Number(m[2]) : 0;
  };
  return { fcall: count('fcall'), evalsha: count('evalsha') };
}

/** Store calls (FCALL and EVALSHA) a server has run so far, failed ones included. */
export async function storeCallsOn(node: { info(section: 'commandstats'): Promise<string> }): Promise<number> {
  const info = await node.info('commandstats');
  let c = 0;
  for (const m of info.matchAll(/cmdstat_(?:evalsha|fcall):calls=(\d+)/g)) c += Number(m[1]);
  return c;
}
