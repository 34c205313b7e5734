/**
 * Real Redis for tests (STYLE "Tests": never a mock). Starts `redis-server` processes on
 * free loopback ports, each in its own temporary directory without persistence, and a
 * three-master Redis Cluster built with `redis-cli --cluster create`. Call the helpers
 * from `beforeAll` and stop the servers in `afterAll`; a process exit kills whatever is
 * left, so a crashed run leaves no server behind.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const p of live) p.kill('SIGKILL');
});

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * A free port whose cluster bus port (port + 10000) is free too. Chosen at random below
 * the ephemeral range so that parallel test files rarely collide.
 */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 20000 + Math.floor(Math.random() * 20000);
    if ((await canBind(port)) && (await canBind(port + 10000))) return port;
  }
  throw new Error('no free port pair found for redis-server');
}

/**
 * Sends one inline command over a raw socket; `read` turns the text received so far into
 * the reply, or undefined while it is incomplete.
 */
function rawReply<T>(port: number, command: string, timeoutMs: number, read: (out: string) => T | undefined): Promise<T> {
  return new Promise((resolve, reject) => {
    const sock = new Socket();
    let out = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no reply to ${command} on ${port}`));
    }, timeoutMs);
    sock.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    sock.on('data', (d) => {
      out += d.toString();
      const reply = read(out);
      if (reply !== undefined) {
        clearTimeout(timer);
        sock.end();
        resolve(reply);
      }
    });
    sock.connect(port, '127.0.0.1', () => sock.write(`${command}\r\n`));
  });
}

/** Sends one inline command over a raw socket and resolves with the reply text. */
export function rawCommand(port: number, command: string, timeoutMs = 1000): Promise<string> {
  // A simple or bulk reply is complete once its last line ends.
  return rawReply(port, command, timeoutMs, (out) =>
    (/^[+\-:]/.test(out) ? out.endsWith('\r\n') : /^\$(-1|\d+)\r\n/.test(out) && complete(out)) ? out : undefined,
  );
}

function complete(bulk: string): boolean {
  const m = /^\$(-1|\d+)\r\n/.exec(bulk) as RegExpExecArray;
  if (m[1] === '-1') return true;
  return Buffer.byteLength(bulk) >= m[0].length + Number(m[1]) + 2;
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** One `redis-server` process that can be stopped and started again on the same port. */
export class RedisServer {
  readonly port: number;
  readonly dir: string;
  readonly #extra: string[];
  #proc: ChildProcess | undefined;

  constructor(port: number, extra: string[] = []) {
    this.port = port;
    this.dir = mkdtempSync(join(tmpdir(), 'tollgate-redis-'));
    this.#extra = extra;
  }

  get running(): boolean {
    return this.#proc !== undefined;
  }

  async start(): Promise<void> {
    if (this.#proc) return;
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    args.push('--dir', this.dir, '--protected-mode', 'no', '--loglevel', 'warning', ...this.#extra);
    const proc = spawn('redis-server', args, { stdio: 'ignore' });
    this.#proc = proc;
    live.add(proc);
    proc.once('exit', () => {
      live.delete(proc);
      if (this.#proc === proc) this.#proc = undefined;
    });
    await waitFor(`redis-server on ${this.port}`, async () => (await rawCommand(this.port, 'PING')).startsWith('+PONG'), 10_000);
  }

  /** Kills the server (SIGKILL: an outage, not a shutdown) and waits until the port is closed. */
  async stop(): Promise<void> {
    const proc = this.#proc;
    if (!proc) return;
    const exited = new Promise<void>((r) => proc.once('exit', () => r()));
    proc.kill('SIGKILL');
    await exited;
    this.#proc = undefined;
  }

  /** Freezes the server (SIGSTOP): its connections stay open and nothing is answered. */
  pause(): void {
    this.#proc?.kill('SIGSTOP');
  }

  /** Lets a paused server go on (SIGCONT). */
  resume(): void {
    this.#proc?.kill('SIGCONT');
  }

  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Starts a standalone server on a free port. */
export async function startRedis(extra: string[] = []): Promise<RedisServer> {
  const server = new RedisServer(await freePort(), extra);
  await server.start();
  return server;
}

export interface RedisCluster {
  readonly nodes: RedisServer[];
  /** `{ host, port }` of each master, for `new Cluster(...)`. */
  readonly startupNodes: { host: string; port: number }[];
  destroy(): Promise<void>;
}

function run(cmd: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')} failed: ${err.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/**
 * Starts three masters with `--cluster-enabled yes`, joins them with
 * `redis-cli --cluster create ... --cluster-yes` and waits until every node reports
 * `cluster_state:ok` with all 16384 slots served and knows all three masters.
 */
export async function startCluster(): Promise<RedisCluster> {
  const nodes: RedisServer[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const node = new RedisServer(port, [
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        '--cluster-node-timeout',
        '5000',
      ]);
      nodes.push(node);
    }
    await Promise.all(nodes.map((n) => n.start()));
    const addrs = nodes.map((n) => `127.0.0.1:${n.port}`);
    await run('redis-cli', ['--cluster', 'create', ...addrs, '--cluster-replicas', '0', '--cluster-yes'], 30_000);
    for (const n of nodes) {
      await waitFor(
        `cluster node ${n.port} ready`,
        async () => {
          const info = await rawCommand(n.port, 'CLUSTER INFO');
          return /cluster_state:ok/.test(info) && /cluster_slots_ok:16384/.test(info) && /cluster_known_nodes:3/.test(info);
        },
        30_000,
      );
    }
  } catch (err) {
    await Promise.all(nodes.map((n) => n.destroy()));
    throw err;
  }
  return {
    nodes,
    startupNodes: nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
    destroy: async () => {
      await Promise.all(nodes.map((n) => n.destroy()));
    },
  };
}

/** The keys matching `match` that have no expiry (PTTL -1), on every master of a Cluster. */
export async function keysWithoutExpiry(client: object, match: string): Promise<string[]> {
  // Typed loosely: tests may hold a client of either ioredis major installed here.
  const nodes = (client as { isCluster?: boolean }).isCluster
    ? (client as import('ioredis').Cluster).nodes('master')
    : [client as import('ioredis').Redis];
  const found: string[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', 1000);
      cursor = next;
      for (const k of keys) if ((await node.pttl(k)) === -1) found.push(k);
    } while (cursor !== '0');
  }
  return found;
}

export interface ReplicatedCluster extends RedisCluster {
  /** The node serving `slot` as master right now, from CLUSTER NODES of a live node. */
  masterOf(slot: number): Promise<RedisServer>;
  /** Replicas of `master` right now. */
  replicasOf(master: RedisServer): Promise<RedisServer[]>;
}

/** One line of CLUSTER NODES: id, address, flags, master id, slot ranges. */
function parseNodes(text: string): { id: string; port: number; flags: string[]; master: string; slots: [number, number][] }[] {
  return text
    .replace(/^\$\d+\r\n/, '')
    .split('\n')
    .filter((l) => /^[0-9a-f]{40} /.test(l))
    .map((l) => {
      const f = l.trim().split(' ');
      const slots: [number, number][] = f.slice(8).flatMap((r) => {
        if (r.startsWith('[')) return [];
        const [a, b] = r.split('-').map(Number);
        return [[a as number, b ?? (a as number)] as [number, number]];
      });
      return {
        id: f[0] as string,
        port: Number((f[1] as string).split(':')[1]?.split('@')[0]),
        flags: (f[2] as string).split(','),
        master: f[3] as string,
        slots,
      };
    });
}

/**
 * Three masters with one replica each (`--cluster-replicas 1`), for failover tests. A
 * small `cluster-node-timeout` (default 1000 ms) makes a replica take over quickly once
 * its master is killed. Waits until all six nodes agree the cluster is ok and every
 * replica is attached with its replication link up (else it could not take over).
 */
export async function startClusterWithReplicas(nodeTimeoutMs = 1000): Promise<ReplicatedCluster> {
  const nodes: RedisServer[] = [];
  try {
    for (let i = 0; i < 6; i++) {
      const node = new RedisServer(await freePort(), [
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        '--cluster-node-timeout',
        String(nodeTimeoutMs),
      ]);
      nodes.push(node);
    }
    await Promise.all(nodes.map((n) => n.start()));
    const addrs = nodes.map((n) => `127.0.0.1:${n.port}`);
    await run('redis-cli', ['--cluster', 'create', ...addrs, '--cluster-replicas', '1', '--cluster-yes'], 30_000);
    for (const n of nodes) {
      await waitFor(
        `cluster node ${n.port} ready`,
        async () => {
          const info = await rawCommand(n.port, 'CLUSTER INFO');
          if (!/cluster_state:ok/.test(info) || !/cluster_slots_ok:16384/.test(info) || !/cluster_known_nodes:6/.test(info)) return false;
          const view = parseNodes(await rawCommand(n.port, 'CLUSTER NODES'));
          if (view.filter((x) => x.flags.includes('slave') && x.master !== '-').length !== 3) return false;
          // A replica takes over only with recent data: wait until its link to the master is up.
          const repl = await rawCommand(n.port, 'INFO replication');
          return !/role:slave/.test(repl) || /master_link_status:up/.test(repl);
        },
        30_000,
      );
    }
  } catch (err) {
    await Promise.all(nodes.map((n) => n.destroy()));
    throw err;
  }
  const view = async () => {
    for (const n of nodes) {
      if (!n.running) continue;
      const text = await rawCommand(n.port, 'CLUSTER NODES').catch(() => undefined);
      if (text !== undefined) return parseNodes(text);
    }
    throw new Error('no cluster node answers');
  };
  const byPort = (port: number) => nodes.find((n) => n.port === port) as RedisServer;
  return {
    nodes,
    startupNodes: nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
    async masterOf(slot) {
      const v = await view();
      const m = v.find((x) => x.flags.includes('master') && !x.flags.includes('fail') && x.slots.some(([a, b]) => slot >= a && slot <= b));
      if (!m) throw new Error(`no master serves slot ${slot}`);
      return byPort(m.port);
    },
    async replicasOf(master) {
      const v = await view();
      const id = v.find((x) => x.port === master.port)?.id;
      return v.filter((x) => x.master === id).map((x) => byPort(x.port));
    },
    destroy: async () => {
      await Promise.all(nodes.map((n) => n.destroy()));
    },
  };
}

export interface SentinelSetup {
  /** The master name the sentinels monitor (`new Redis({ sentinels, name })`). */
  readonly name: string;
  /** The server that was master at the start, and its replica. */
  readonly master: RedisServer;
  readonly replica: RedisServer;
  /** The sentinels' ports. */
  readonly sentinelPorts: number[];
  /** The port the sentinels name as master right now. */
  masterPort(): Promise<number>;
  destroy(): Promise<void>;
}

/** One `redis-sentinel` process on its own port and config file (which it rewrites). */
class SentinelServer {
  readonly port: number;
  readonly dir: string;
  #proc: ChildProcess | undefined;

  constructor(port: number, name: string, masterPort: number, quorum: number, downAfterMs: number) {
    this.port = port;
    this.dir = mkdtempSync(join(tmpdir(), 'tollgate-sentinel-'));
    writeFileSync(
      join(this.dir, 'sentinel.conf'),
      [
        `port ${port}`,
        'bind 127.0.0.1',
        'protected-mode no',
        `dir ${this.dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${masterPort} ${quorum}`,
        `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
        `sentinel failover-timeout ${name} 5000`,
        `sentinel parallel-syncs ${name} 1`,
        '',
      ].join('\n'),
    );
  }

  async start(): Promise<void> {
    const proc = spawn('redis-sentinel', [join(this.dir, 'sentinel.conf'), '--loglevel', 'warning'], { stdio: 'ignore' });
    this.#proc = proc;
    live.add(proc);
    proc.once('exit', () => live.delete(proc));
    await waitFor(`redis-sentinel on ${this.port}`, async () => (await rawCommand(this.port, 'PING')).startsWith('+PONG'), 10_000);
  }

  async destroy(): Promise<void> {
    const proc = this.#proc;
    if (proc && proc.exitCode === null) {
      const exited = new Promise<void>((r) => proc.once('exit', () => r()));
      proc.kill('SIGKILL');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A master, one replica of it, and `sentinels` Sentinel processes (Debian's
 * `redis-sentinel`) monitoring them with quorum `sentinels / 2 + 1`, all on loopback. The
 * master is declared down `downAfterMs` after it stops answering, so a killed master is
 * replaced within a few seconds. Waits until the replica's link is up and every sentinel
 * knows the replica and the other sentinels (else a failover could not be agreed).
 */
export async function startSentinel(sentinels = 3, downAfterMs = 500): Promise<SentinelSetup> {
  const name = 'tollgate';
  const master = new RedisServer(await freePort());
  const replica = new RedisServer(await freePort(), ['--replicaof', '127.0.0.1', String(master.port)]);
  const watchers: SentinelServer[] = [];
  try {
    await master.start();
    // Replica attached before the sentinels start, so that they find it in INFO at once.
    await replica.start();
    await waitFor('replica link up', async () => /master_link_status:up/.test(await rawCommand(replica.port, 'INFO replication')), 20_000);
    for (let i = 0; i < sentinels; i++)
      watchers.push(new SentinelServer(await freePort(), name, master.port, Math.floor(sentinels / 2) + 1, downAfterMs));
    await Promise.all(watchers.map((s) => s.start()));
    for (const s of watchers) {
      await waitFor(
        `sentinel ${s.port} ready`,
        async () => {
          const info = await rawCommand(s.port, 'INFO sentinel');
          const m = new RegExp(`name=${name},status=ok,address=[^,]+,slaves=(\\d+),sentinels=(\\d+)`).exec(info);
          return m !== null && Number(m[1]) >= 1 && Number(m[2]) >= sentinels;
        },
        30_000,
      );
    }
  } catch (err) {
    await Promise.all([...watchers.map((s) => s.destroy()), master.destroy(), replica.destroy()]);
    throw err;
  }
  return {
    name,
    master,
    replica,
    sentinelPorts: watchers.map((s) => s.port),
    async masterPort() {
      for (const s of watchers) {
        const reply = await rawArray(s.port, `SENTINEL get-master-addr-by-name ${name}`).catch(() => undefined);
        if (reply?.[1] !== undefined) return Number(reply[1]);
      }
      throw new Error('no sentinel names a master');
    },
    destroy: async () => {
      await Promise.all([...watchers.map((s) => s.destroy()), master.destroy(), replica.destroy()]);
    },
  };
}

/** Sends one inline command and reads a flat array reply of bulk strings. */
function rawArray(port: number, command: string, timeoutMs = 1000): Promise<string[]> {
  return rawReply(port, command, timeoutMs, (out) => {
    const m = /^\*(-?\d+)\r\n/.exec(out);
    if (!m) return undefined;
    const lines = out.slice(m[0].length).split('\r\n');
    const n = Number(m[1]);
    if (n <= 0) return [];
    return lines.length > 2 * n ? lines.filter((_, i) => i % 2 === 1).slice(0, n) : undefined;
  });
}
