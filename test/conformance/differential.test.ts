/**
 * MemoryStore and RedisStore answer every program alike: seeded random sequences of
 * decisions (stacks of 1 to 4 rules of every algorithm, weighted costs, countRejected,
 * blockFor, tiers), refunds, reservations settled or cancelled, operations by key, rule
 * updates, clock steps (back, ahead by days) and floods of one key, run side by side on
 * one ManualClock, every answer compared (see differential.ts). On the suite's own
 * redis-server, and on a Cluster with a slot per rule.
 *
 * More programs on demand: TOLLGATE_DIFF_SEEDS=5000 (seeds 1 to 5000) or =7000-9000.
 * A mismatch prints its seed and the shortest program that still shows it.
 */
import { MemoryStore } from '@tollgate/core';
import { RedisStore } from '@tollgate/redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisCluster, type RedisServer, startCluster, startRedis } from '../setup/redis.js';
import {
  ALGORITHMS,
  describeProgram,
  differences,
  makeProgram,
  type ProgramOptions,
  runProgram,
  type StorePair,
  shrink,
} from './differential.js';

/** The seeds to run: the suite's fixed ones, or TOLLGATE_DIFF_SEEDS ("N" or "A-B"). */
function seeds(fixed: number): number[] {
  const spec = process.env.TOLLGATE_DIFF_SEEDS;
  if (!spec) return Array.from({ length: fixed }, (_, i) => i + 1);
  const m = /^(\d+)(?:-(\d+))?$/.exec(spec);
  if (!m) throw new Error(`TOLLGATE_DIFF_SEEDS: expected N or A-B, got ${spec}`);
  const [a, b] = m[2] === undefined ? [1, Number(m[1])] : [Number(m[1]), Number(m[2])];
  return Array.from({ length: b - a + 1 }, (_, i) => a + i);
}

const long = process.env.TOLLGATE_DIFF_SEEDS !== undefined;
const timeout = long ? 24 * 3_600_000 : 60_000;

async function check(list: number[], stores: StorePair, options: ProgramOptions = {}): Promise<void> {
  const reports: string[] = [];
  for (const seed of list) {
    const program = makeProgram(seed, options);
    const m = await runProgram(program, stores);
    if (m === undefined) continue;
    const small = await shrink(program, m.step, stores);
    const last = await runProgram(small, stores);
    const diff = last === undefined ? ['(the shortened program agrees: flaky?)'] : differences(last.memory, last.other);
    reports.push(`${describeProgram(small)}\nstep ${last?.step ?? m.step}, MemoryStore ≠ RedisStore:\n  ${diff.join('\n  ')}`);
    // A long run goes on to collect more; the suite stops at the first.
    if (!long || reports.length >= 20) break;
  }
  if (reports.length > 0) expect.fail(`${reports.length} program(s) differ:\n\n${reports.join('\n\n')}`);
}

it('the programs use every algorithm, stacks of 1 to 4 rules and tiers', () => {
  const programs = seeds(60).map((s) => makeProgram(s));
  const used = new Set(
    programs.flatMap((p) =>
      [...p.rules, ...Object.values(p.tiers ?? {}).flat()].map((r) => `${r.algorithm} ${r.align ?? r.mode ?? r.buckets ?? ''}`),
    ),
  );
  expect(used.size).toBe(ALGORITHMS.length);
  expect(new Set(programs.map((p) => p.rules.length))).toEqual(new Set([0, 1, 2, 3, 4]));
  expect(programs.some((p) => p.tiers !== undefined)).toBe(true);
});

describe('standalone redis-server', () => {
  let server: RedisServer;
  let client: Redis;
  beforeAll(async () => {
    server = await startRedis();
    client = new Redis({ port: server.port, host: '127.0.0.1' });
  });
  afterAll(async () => {
    client.disconnect();
    await server.destroy();
  });
  // Keys outlive the program in Redis' own time: the supplied clock alone ends a state.
  const stores: StorePair = (clock, prefix) => {
    const other = new RedisStore({ client, prefix, timeoutMs: 5000, minTtlMs: 3_600_000, denyCache: false });
    const errors: unknown[] = [];
    other.on('error', (e: { error: unknown }) => errors.push(e.error));
    return { memory: new MemoryStore({ clock, sweepIntervalMs: 0 }), other, errors: () => errors.splice(0) };
  };
  it('answers as MemoryStore, program by program', { timeout }, async () => {
    await check(seeds(160), stores);
  });
});

// A slot per rule (a group's rules share one: their counter is one key).
describe('Redis Cluster, a slot per rule', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  beforeAll(async () => {
    cluster = await startCluster();
    client = new Cluster(cluster.startupNodes);
    await client.ping();
  });
  afterAll(async () => {
    client.disconnect();
    await cluster.destroy();
  });
  const stores: StorePair = (clock, prefix) => {
    const other = new RedisStore({
      client,
      prefix,
      timeoutMs: 5000,
      minTtlMs: 3_600_000,
      denyCache: false,
      hashTag: (rule) => rule.replace(/g$/, ''),
    });
    const errors: unknown[] = [];
    other.on('error', (e: { error: unknown }) => errors.push(e.error));
    return {
      memory: new MemoryStore({ clock, sweepIntervalMs: 0 }),
      other,
      errors: () => errors.splice(0),
      sequential: true,
      ignoreExists: true,
    };
  };
  it('answers as MemoryStore, program by program', { timeout }, async () => {
    await check(seeds(40), stores, { backward: false, lowerBurst: false });
  });
});
