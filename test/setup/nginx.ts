/**
 * Debian's nginx as a real reverse proxy for tests (issue 9, item 5). Started on loopback
 * with its own temporary prefix and configuration (`-p <dir> -c <conf> -e <log>`,
 * `daemon off`), so it needs no access to /etc/nginx or /var/log and leaves nothing
 * behind. Each upstream gets a server block on a free port that proxies to it and
 * appends the peer address to `X-Forwarded-For`, from 127.0.0.1 (`proxy_bind`).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './redis.js';

/** The nginx binary, or undefined when it is not installed (/usr/sbin may not be on PATH). */
export function findNginx(): string | undefined {
  try {
    const found = execFileSync('sh', ['-c', 'command -v nginx'], { encoding: 'utf8' }).trim();
    if (found) return found;
  } catch {
    // not on PATH
  }
  try {
    accessSync('/usr/sbin/nginx', constants.X_OK);
    return '/usr/sbin/nginx';
  } catch {
    return undefined;
  }
}

export interface Nginx {
  /** One listening port per upstream, in order. */
  ports: number[];
  stop(): Promise<void>;
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = new Socket();
    s.once('error', () => resolve(false));
    s.connect(port, '127.0.0.1', () => {
      s.destroy();
      resolve(true);
    });
  });
}

/** Starts nginx in front of `upstreams` (loopback ports); resolves once every port accepts. */
export async function startNginx(upstreams: number[]): Promise<Nginx> {
  const bin = findNginx();
  if (!bin) throw new Error('nginx not found: apt-get install -y nginx');
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-nginx-'));
  for (const sub of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, sub));
  const ports: number[] = [];
  for (const _ of upstreams) ports.push(await freePort());
  const servers = upstreams
    .map(
      (up, i) => `
  server {
    listen 127.0.0.1:${ports[i]};
    location / {
      proxy_pass http://127.0.0.1:${up};
      proxy_bind 127.0.0.1;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
  }`,
    )
    .join('\n');
  const conf = `
${process.getuid?.() === 0 ? 'user root;' : ''}
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path ${join(dir, 'client_body')};
  proxy_temp_path ${join(dir, 'proxy')};
  fastcgi_temp_path ${join(dir, 'fastcgi')};
  uwsgi_temp_path ${join(dir, 'uwsgi')};
  scgi_temp_path ${join(dir, 'scgi')};
${servers}
}
`;
  const confPath = join(dir, 'nginx.conf');
  writeFileSync(confPath, conf);
  const proc: ChildProcess = spawn(bin, ['-p', dir, '-c', confPath, '-e', join(dir, 'error.log'), '-g', 'daemon off;'], {
    stdio: 'ignore',
  });
  const kill = () => proc.kill('SIGKILL');
  process.once('exit', kill);
  let exited = false;
  proc.once('exit', () => {
    exited = true;
  });
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (exited) {
      let log = '';
      try {
        log = readFileSync(join(dir, 'error.log'), 'utf8');
      } catch {}
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`nginx exited at start:\n${log}`);
    }
    if ((await Promise.all(ports.map(canConnect))).every(Boolean)) break;
    if (Date.now() > deadline) {
      kill();
      throw new Error('nginx did not listen within 10 s');
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    ports,
    async stop() {
      process.off('exit', kill);
      if (!exited) {
        const gone = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGQUIT');
        const timer = setTimeout(kill, 3000);
        await gone;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
