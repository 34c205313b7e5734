/**
 * The script runs of a `RedisStore`'s decisions and give-backs, by Cluster slot: a stack
 * whose keys share a slot (or any stack on a standalone server) is one run; one spanning
 * slots is one run per slot, side by side, and when any slot refuses, the slots that
 * admitted give back what they admitted (reserve-then-refund; the bound is in
 * docs/distributed.md). Each slot decides at its own node's TIME, so the times of a
 * multi-slot decision are kept for its refund.
 */
import type { StoreDecision, StoreOp } from '@tollgate/core';
import { decideArgs, parseDecisions, refundArgs, type StackCall } from './args.js';
import type { RedisPort } from './client.js';
import { slotOf } from './keys.js';
import { runScript } from './script.js';

/** Multi-slot decisions remembered for their per-slot times (refunds need them). */
const GROUP_TIMES_MAX = 10_000;

/** Decisions and give-backs in Redis, one script run per slot group. */
export class SlotRuns {
  readonly #port: RedisPort;
  readonly #minTtl: string;
  readonly #cluster: boolean;
  /** `${at}|${redis key}` → the time the op's slot decided at (multi-slot, Redis time). */
  readonly #groupTimes = new Map<string, number>();

  constructor(port: RedisPort, minTtl: string) {
    this.#port = port;
    this.#minTtl = minTtl;
    this.#cluster = port.cluster;
  }

  /** Forgets the per-slot times kept for refunds. */
  clear(): void {
    this.#groupTimes.clear();
  }

  /** Decides `ops` in Redis: one script per slot group. */
  async decide(cmd: 'c' | 'p', ops: readonly StoreOp[], keys: string[], now: number | undefined): Promise<StoreDecision> {
    const groups = this.#groups(keys);
    if (groups === undefined) return this.#oneRun({ cmd, ops, now }, keys);
    const parts = await Promise.all(
      groups.map(async (idx) => {
        const gops = idx.map((i) => ops[i] as StoreOp);
        const reply = await runScript(
          this.#port,
          decideArgs(
            [{ cmd, ops: gops, now }],
            idx.map((i) => keys[i] as string),
            this.#minTtl,
          ),
        );
        return parseDecisions(reply, [gops.length])[0] as StoreDecision;
      }),
    );
    const outcomes: StoreDecision['outcomes'] = new Array(ops.length);
    let allowed = true;
    for (const [g, idx] of groups.entries()) {
      const part = parts[g] as StoreDecision;
      if (!part.allowed) allowed = false;
      idx.forEach((i, j) => {
        outcomes[i] = part.outcomes[j] as StoreDecision['outcomes'][number];
      });
    }
    const first = parts[0] as StoreDecision;
    if (!allowed) {
      // The slots that admitted: a consume's gave what they admitted back (reserve-then-refund).
      // Their admitting rules then report the state as found, as on one slot: the cost back
      // in `remaining`, and `resetMs` read again at the slot's decision time at cost 0 (a
      // check of cost 0 is the state's own), not the admission's.
      await Promise.all(
        groups.map(async (idx, g) => {
          const part = parts[g] as StoreDecision;
          if (!part.allowed) return;
          const back = idx.filter((_, j) => (part.outcomes[j] as StoreDecision['outcomes'][number]).allowed);
          if (back.length === 0) return;
          const backOps = back.map((i) => ops[i] as StoreOp);
          const backKeys = back.map((i) => keys[i] as string);
          if (cmd === 'c') await runScript(this.#port, refundArgs(backOps, backKeys, now, part.now, this.#minTtl));
          const unchanged = backOps.map((op) => ({ ...op, cost: 0 }));
          const reply = await runScript(this.#port, decideArgs([{ cmd: 'p', ops: unchanged, now: part.now }], backKeys, this.#minTtl));
          const found = parseDecisions(reply, [back.length])[0] as StoreDecision;
          back.forEach((i, j) => {
            const o = outcomes[i] as StoreDecision['outcomes'][number];
            o.remaining += (ops[i] as StoreOp).cost;
            o.resetMs = (found.outcomes[j] as StoreDecision['outcomes'][number]).resetMs;
          });
        }),
      );
      for (const o of outcomes) o.delayMs = 0;
    } else if (cmd === 'c' && now === undefined) {
      // Each slot decided at its own node's TIME; a later refund must name those times.
      for (const [g, idx] of groups.entries()) {
        const part = parts[g] as StoreDecision;
        if (part.now !== first.now) for (const i of idx) this.#rememberTime(`${first.now}|${keys[i]}`, part.now);
        else if (this.#groupTimes.size > 0) {
          // An earlier decision in the same millisecond may have left a time for these keys;
          // this decision's slots agreed, so a refund of it must not pick that time up.
          for (const i of idx) this.#groupTimes.delete(`${first.now}|${keys[i]}`);
        }
      }
    }
    return { allowed, now: first.now, outcomes };
  }

  /**
   * Decides one stack whose keys share a slot, in its own script run: on a Cluster (its
   * stacks would span slots) or with `batch: false`. Batched stacks go through the store's Batcher (batch.ts).
   */
  #oneRun(call: StackCall, keys: readonly string[]): Promise<StoreDecision> {
    return runScript(this.#port, decideArgs([call], keys, this.#minTtl)).then(
      (r) => parseDecisions(r, [call.ops.length])[0] as StoreDecision,
    );
  }

  async giveBack(argsOf: typeof refundArgs, ops: readonly StoreOp[], keys: string[], at: number, now: number | undefined): Promise<void> {
    const groups = this.#groups(keys);
    if (groups === undefined) {
      await runScript(this.#port, argsOf(ops, keys, now, at, this.#minTtl));
      return;
    }
    await Promise.all(
      groups.map((idx) => {
        const k = idx.map((i) => keys[i] as string);
        const groupAt = this.#groupTimes.get(`${at}|${k[0]}`) ?? at;
        return runScript(
          this.#port,
          argsOf(
            idx.map((i) => ops[i] as StoreOp),
            k,
            now,
            groupAt,
            this.#minTtl,
          ),
        );
      }),
    );
  }

  /** Whether one script run takes every key (a standalone server, or keys of one slot). */
  oneRun(keys: readonly string[]): boolean {
    return this.#groups(keys) === undefined;
  }

  #rememberTime(id: string, t: number): void {
    if (this.#groupTimes.size >= GROUP_TIMES_MAX) {
      const oldest = this.#groupTimes.keys().next();
      if (!oldest.done) this.#groupTimes.delete(oldest.value);
    }
    this.#groupTimes.set(id, t);
  }

  /** Op indices grouped by Cluster slot, or undefined when one script can take them all. */
  #groups(keys: readonly string[]): number[][] | undefined {
    if (!this.#cluster || keys.length < 2) return undefined;
    const bySlot = new Map<number, number[]>();
    for (let i = 0; i < keys.length; i++) {
      const s = slotOf(keys[i] as string);
      const g = bySlot.get(s);
      if (g) g.push(i);
      else bySlot.set(s, [i]);
    }
    return bySlot.size === 1 ? undefined : [...bySlot.values()];
  }
}
