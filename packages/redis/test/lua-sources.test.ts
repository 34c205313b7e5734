/**
 * The Lua sources (packages/redis/lua) and the module generated from them: the module is what
 * the generator makes of the sources today (an edit to one without the other fails here),
 * every file and every assembled script is valid Lua 5.1, and Redis itself compiles each
 * script and the library.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { ALGORITHM_NAMES, registry } from '@tollgate/core';
import { STORE_LIBRARY, STORE_LIBRARY_NAME, STORE_SCRIPT, STORE_SCRIPT_SHA } from '@tollgate/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../../../test/setup/redis.js';
import * as generated from '../src/lua/generated.js';
import { KEYS_SCRIPT, KEYS_SCRIPT_SHA } from '../src/lua/index.js';
import { SLOT_SCRIPT, SLOT_SCRIPT_SHA } from '../src/lua/slots.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const generator = `${root}scripts/generate-lua.mjs`;
const luaparse = createRequire(import.meta.url)('luaparse') as { parse(code: string, options: object): unknown };

/** The syntax error of `code` as Lua 5.1, or undefined. */
function syntaxError(code: string): string | undefined {
  try {
    luaparse.parse(code, { luaVersion: '5.1', comments: false, scope: false });
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

const sources = (): string[] =>
  execFileSync('node', ['-e', `import(${JSON.stringify(generator)}).then((m) => console.log(m.luaFiles().join('\\n')))`])
    .toString()
    .trim()
    .split('\n');

describe('Lua sources', () => {
  it('generated.ts is what scripts/generate-lua.mjs makes of packages/redis/lua', () => {
    const fresh = execFileSync('node', [generator, '--print']).toString();
    expect(readFileSync(`${root}packages/redis/src/lua/generated.ts`, 'utf8')).toBe(fresh);
  });

  it("each algorithm of core's registry has its kernel file, defining ALG[code] under the registry's wire code, and a section guarded by that code", () => {
    for (const a of ALGORITHM_NAMES) {
      const code = registry[a].code;
      const lua = readFileSync(`${root}packages/redis/lua/${a}.lua`, 'utf8');
      expect(lua, a).toMatch(new RegExp(`^ALG\\['${code}'\\] = \\{`, 'm'));
      expect(STORE_SCRIPT, a).toContain(`if NEED['${code}'] then\n-- Lua mirror of core/src/algorithms/${a}.ts`);
      // Its state's width as the registry has it (an entry's field count follows from it).
      expect(lua, a).toMatch(new RegExp(`^ALG\\['${code}'\\] = \\{\\n(?:  --.*\\n)*  width = ${registry[a].width},$`, 'm'));
    }
  });

  it('the shared Lua names no algorithm: what differs by algorithm is in its ALG entry', () => {
    const perAlgorithm = new Set(ALGORITHM_NAMES.map((a) => `${a}.lua`));
    const shared = sources().filter((f) => !f.startsWith('inline/') && !perAlgorithm.has(f));
    expect(shared).toContain('parse.lua');
    for (const f of shared) {
      const code = readFileSync(`${root}packages/redis/lua/${f}`, 'utf8').replace(/--.*$/gm, '');
      expect(code, f).not.toMatch(/algo *[=~]= *'|ALG\[['"]/);
    }
  });

  it('every .lua file, included ones too, is valid Lua 5.1 as it is', () => {
    const files = sources();
    expect(files).toContain('stack.lua');
    expect(files.some((f) => f.startsWith('inline/'))).toBe(true);
    for (const f of files) expect(syntaxError(readFileSync(`${root}packages/redis/lua/${f}`, 'utf8')), f).toBeUndefined();
  });

  it('every generated section and every assembled script is valid Lua 5.1', () => {
    for (const [name, code] of Object.entries(generated)) expect(syntaxError(code), name).toBeUndefined();
    // The library's first line is FUNCTION LOAD's header, not Lua.
    const library = STORE_LIBRARY.slice(STORE_LIBRARY.indexOf('\n') + 1);
    for (const [name, code] of Object.entries({ library, STORE_SCRIPT, KEYS_SCRIPT, SLOT_SCRIPT }))
      expect(syntaxError(code), name).toBeUndefined();
  });

  it('a syntax error is caught (the check is not vacuous)', () => {
    expect(syntaxError('local x = ')).toMatch(/expected/);
    expect(syntaxError(STORE_SCRIPT.replace('local function', 'local functio'))).toBeDefined();
  });
});

describe('Lua sources in a real Redis', () => {
  let server: RedisServer;
  let admin: Redis;
  beforeAll(async () => {
    server = await startRedis();
    admin = new Redis({ port: server.port, host: '127.0.0.1' });
  });
  afterAll(async () => {
    admin.disconnect();
    await server.destroy();
  });

  it('Redis compiles every script (SCRIPT LOAD) under the SHA the store sends', async () => {
    expect(await admin.script('LOAD', STORE_SCRIPT)).toBe(STORE_SCRIPT_SHA);
    expect(await admin.script('LOAD', KEYS_SCRIPT)).toBe(KEYS_SCRIPT_SHA);
    expect(await admin.script('LOAD', SLOT_SCRIPT)).toBe(SLOT_SCRIPT_SHA);
  });

  it('Redis loads the library (FUNCTION LOAD) with its three functions', async () => {
    expect(await admin.call('FUNCTION', 'LOAD', 'REPLACE', STORE_LIBRARY)).toBe(STORE_LIBRARY_NAME);
    const listed = JSON.stringify(await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', STORE_LIBRARY_NAME));
    for (const fn of ['store', 'slots', 'keys']) expect(listed).toContain(`${STORE_LIBRARY_NAME}_${fn}`);
  });
});
