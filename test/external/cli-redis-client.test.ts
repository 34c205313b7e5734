/**
 * `tollgate keys` uses the Redis client the application already has. @tollgate/cli used to
 * depend on ioredis 5, so an app on ioredis 6 or on node-redis got a second client; the
 * clients are now optional peers, loaded when `keys` runs. Checked as a user gets it: the
 * packed @tollgate/core, /redis and /cli installed with npm into a fresh project, against
 * a real redis-server:
 * - with node-redis only: `keys` works through it, and no ioredis is installed;
 * - with ioredis 6 added: `keys` works through it, and it is the project's only ioredis;
 * - with neither: `keys` stops with TG_CLI_NO_REDIS_CLIENT saying what to install.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../setup/redis.js';
import { installTarballs, packAll, run, workspaceRange } from './packed.js';

let work: string;
let app: string;
let redis: RedisServer;

beforeAll(async () => {
  const started = startRedis();
  work = mkdtempSync(join(tmpdir(), 'tollgate-cli-client-'));
  const all = await packAll(join(work, 'tarballs'));
  const wanted = new Map([...all].filter(([name]) => ['@tollgate/core', '@tollgate/redis', '@tollgate/cli'].includes(name)));
  expect(wanted.size).toBe(3);
  app = join(work, 'app');
  await installTarballs(app, wanted, { redis: workspaceRange('redis') ?? '^5.0.0' });
  redis = await started;
}, 300_000);

afterAll(async () => {
  await redis?.destroy();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Runs the installed `tollgate keys ...`; its exit code and output. */
async function keys(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const bin = join(app, 'node_modules/@tollgate/cli/bin/tollgate.js');
  const url = `redis://127.0.0.1:${redis.port}`;
  const argv = [bin, 'keys', ...args, '--redis', url, '--rule', 'ip', '--rate', '5/min', '--key', 'k1', '--json'];
  return new Promise((resolve) => {
    execFile(process.execPath, argv, { cwd: app, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number(err.code ?? -1) : 0, stdout, stderr });
    });
  });
}

const npm = (args: string[]) => run('npm', [...args, '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], app, 240_000);
const installed = (name: string) => existsSync(join(app, 'node_modules', name, 'package.json'));

it("uses the application's node-redis, ioredis 6 when it has that, and names what to install when it has neither", {
  timeout: 300_000,
}, async () => {
  // node-redis only: nothing of ioredis comes with the CLI.
  expect(installed('redis')).toBe(true);
  expect(installed('ioredis')).toBe(false);
  // An hour: the block must outlast the npm install below, which can take minutes on a busy machine.
  const blocked = await keys(['block', '--for', '1h']);
  expect(blocked.code, blocked.stderr).toBe(0);
  expect(JSON.parse(blocked.stdout).state).toMatchObject({ rule: 'ip', key: 'k1', blocked: true });

  // ioredis 6 beside it: taken first, and the only ioredis in the project.
  await npm(['install', 'ioredis@^6']);
  expect(JSON.parse(readFileSync(join(app, 'node_modules/ioredis/package.json'), 'utf8')).version).toMatch(/^6\./);
  const copies = (await npm(['ls', 'ioredis', '--all', '--parseable'])).split('\n').filter((l) => l.trim() !== '');
  expect(copies).toEqual([join(app, 'node_modules/ioredis')]);
  const got = await keys(['get']);
  expect(got.code, got.stderr).toBe(0);
  expect(JSON.parse(got.stdout).state).toMatchObject({ key: 'k1', blocked: true });

  // Neither: a coded error with the fix, exit code 2.
  await npm(['uninstall', 'ioredis', 'redis']);
  expect(installed('ioredis') || installed('redis')).toBe(false);
  const none = await keys(['get']);
  expect(none.code).toBe(2);
  expect(none.stderr).toMatch(/TG_CLI_NO_REDIS_CLIENT/);
  expect(none.stderr).toMatch(/npm install ioredis, or npm install redis/);
});
