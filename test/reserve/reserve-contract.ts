/**
 * Reserve, then settle: the same cases on every store, through the public API, on the
 * limiter's injected clock. Per algorithm: a settle below the estimate gives the difference
 * back, one above it leaves a debt that refuses later requests for exactly the time it
 * takes to pay off (Retry-After exact, remaining never below 0), a cancel gives the
 * estimate back; stacks are all or nothing; hostile actual costs are coded errors that
 * leave the reservation open; and the bound of reservations (docs/reserve.md), as a
 * property over random estimates, actual costs, cancels and clock steps.
 */
import { createLimiter, ManualClock, type Reservation, type Rule, type RuleSpec, type Store, TollgateError } from '@tollgate/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

// On the hour: every window of these rules starts here.
export const START = Date.UTC(2026, 0, 1, 10);

export type Req = { k: string };
type RuleUnderTest = Omit<Rule<Req>, 'name' | 'key'>;

export interface ReserveCase {
  label: string;
  rule: RuleUnderTest;
  /**
   * The bound's shape: `bucket` (at most B + r·T in an interval of length T, plus the
   * largest overshoot: the debt is carried exactly), or `windows` (at most L plus the largest
   * overshoot per window of W the interval touches: a counting window forgets a debt with
   * the usage it holds).
   */
  bound: 'bucket' | 'windows';
}

export const RESERVE_CASES: readonly ReserveCase[] = [
  { label: 'fixed-window', rule: { algorithm: 'fixed-window', limit: 10, window: '1m' }, bound: 'windows' },
  { label: 'sliding-window', rule: { algorithm: 'sliding-window', limit: 10, window: '1m' }, bound: 'windows' },
  { label: 'sliding-log', rule: { algorithm: 'sliding-log', limit: 10, window: '1m' }, bound: 'windows' },
  { label: 'token-bucket', rule: { algorithm: 'token-bucket', limit: 10, window: '1m' }, bound: 'bucket' },
  { label: 'leaky-bucket meter', rule: { algorithm: 'leaky-bucket', limit: 10, window: '1m' }, bound: 'bucket' },
  { label: 'leaky-bucket queue', rule: { algorithm: 'leaky-bucket', mode: 'queue', queue: 10, limit: 10, window: '1m' }, bound: 'bucket' },
  { label: 'sliding-buckets', rule: { algorithm: 'sliding-buckets', limit: 10, window: '1m' }, bound: 'windows' },
];

export type MakeStore = (clock: ManualClock, prefix: string) => Store;

async function code(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(TollgateError);
    return (err as TollgateError).code;
  }
  return undefined;
}

export function reserveContract(name: string, makeStore: MakeStore, o: { runs?: number } = {}): void {
  let n = 0;
  function setup(rules: Rule<Req>[]) {
    const clock = new ManualClock(START);
    const prefix = `rs${++n}`;
    const store = makeStore(clock, `${prefix}:`);
    return { clock, store, l: createLimiter({ rules, store, clock, prefix }) };
  }
  const one = (c: ReserveCase) => setup([{ name: 'r', key: (q) => q.k, ...c.rule }]);
  const req = { k: 'a' };

  describe(`${name}: reserve and settle`, () => {
    for (const c of RESERVE_CASES) {
      it(`${c.label}: below the estimate gives the difference back; cancel gives it all back`, async () => {
        const { store, l } = one(c);
        const r = await l.reserve(req, { cost: 6 });
        expect(r.allowed).toBe(true);
        expect(r.decision.rules[0]?.remaining).toBe(4);
        await r.settle(2);
        expect(r.settled).toBe(true);
        expect((await l.get('r', 'a')).remaining).toBe(8);
        const r2 = await l.reserve(req, { cost: 5 });
        expect(r2.decision.rules[0]?.remaining).toBe(3);
        await r2.cancel();
        expect((await l.get('r', 'a')).remaining).toBe(8);
        await store.close();
      });

      it(`${c.label}: above the estimate leaves a debt; later requests wait exactly until it is paid off`, async () => {
        const { clock, store, l } = one(c);
        const r = await l.reserve(req, { cost: 4 });
        await r.settle(25);
        const owed = await l.get('r', 'a');
        expect(owed.remaining).toBe(0);
        expect(owed.retryAfterMs).toBeGreaterThan(0);
        const refused = await l.consume(req);
        expect(refused.allowed).toBe(false);
        expect(refused.rules[0]?.remaining).toBe(0);
        expect(refused.retryAfterMs).toBe(owed.retryAfterMs);
        // Exact: still refused 1 ms before, admitted at the time said.
        clock.advance(refused.retryAfterMs - 1);
        const before = await l.peek(req);
        expect(before.allowed).toBe(false);
        expect(before.rules[0]?.remaining).toBe(0);
        clock.advance(1);
        expect((await l.consume(req)).allowed).toBe(true);
        await store.close();
      });
    }

    it('token-bucket: the debt is exact, 25 units after a reservation of 4 (L 10/min: 6 s a unit)', async () => {
      const { clock, store, l } = one(RESERVE_CASES[3] as ReserveCase);
      await (await l.reserve(req, { cost: 4 })).settle(25);
      // 10 - 25 = -15 tokens: a request of 1 needs 16 tokens, 96 s.
      expect((await l.get('r', 'a')).retryAfterMs).toBe(96_000);
      clock.advance(96_000);
      expect((await l.consume(req)).allowed).toBe(true);
      await store.close();
    });

    it('a stack is all or nothing: a refused reservation reserved nothing and cannot be settled', async () => {
      const { store, l } = setup([
        { name: 'minute', key: (q) => q.k, algorithm: 'token-bucket', limit: 100, window: '1m' },
        { name: 'hour', key: (q) => q.k, algorithm: 'fixed-window', limit: 5, window: '1h' },
      ]);
      const r = await l.reserve(req, { cost: 6 });
      expect(r.allowed).toBe(false);
      expect(r.decision.rejectedBy).toEqual(['hour']);
      expect((await l.get('minute', 'a')).remaining).toBe(100);
      expect(await code(r.settle(1))).toBe('TG_RESERVATION_REFUSED');
      expect(await code(r.cancel())).toBe('TG_RESERVATION_REFUSED');
      // Admitted: every rule settles at the actual cost.
      const ok = await l.reserve(req, { cost: 2 });
      await ok.settle(7);
      expect((await l.get('minute', 'a')).remaining).toBe(93);
      expect((await l.get('hour', 'a')).remaining).toBe(0);
      await store.close();
    });

    it('settles at most once, concurrent settles included; an unsettled reservation stays at its estimate', async () => {
      const { store, l } = one(RESERVE_CASES[0] as ReserveCase);
      const r = await l.reserve(req, { cost: 3 });
      const both = await Promise.allSettled([r.settle(1), r.settle(9)]);
      expect(both[0]?.status).toBe('fulfilled');
      expect(both[1]?.status === 'rejected' && (both[1].reason as TollgateError).code).toBe('TG_ALREADY_SETTLED');
      expect(await code(r.cancel())).toBe('TG_ALREADY_SETTLED');
      expect((await l.get('r', 'a')).remaining).toBe(9);
      await l.reserve(req, { cost: 4 });
      expect((await l.get('r', 'a')).remaining).toBe(5);
      await store.close();
    });

    it('hostile actual costs are coded errors that leave the reservation open at its estimate', async () => {
      const { store, l } = one(RESERVE_CASES[0] as ReserveCase);
      const r = await l.reserve(req, { cost: 3 });
      for (const bad of [Number.NaN, -1, Number.POSITIVE_INFINITY, '5', null, undefined, 10_001, 1e300]) {
        expect(await code(r.settle(bad as number))).toBe('TG_INVALID_ACTUAL_COST');
        expect(r.settled).toBe(false);
      }
      expect((await l.get('r', 'a')).remaining).toBe(7);
      // 1000 times the rule's largest cost is accepted; a fraction counts as the next unit.
      await r.settle(2.2);
      expect((await l.get('r', 'a')).remaining).toBe(7);
      await store.close();
    });

    it('a rule already given back (a refund of the decision) is not settled again', async () => {
      const { store, l } = one(RESERVE_CASES[0] as ReserveCase);
      const r = await l.reserve(req, { cost: 3 });
      await l.refund(req, r.decision);
      await r.settle(8);
      expect((await l.get('r', 'a')).remaining).toBe(10);
      // And a settle spends the decision's refund: a later refund gives nothing twice.
      const r2 = await l.reserve(req, { cost: 3 });
      await r2.settle(5);
      await l.refund(req, r2.decision);
      expect((await l.get('r', 'a')).remaining).toBe(5);
      await store.close();
    });

    it('settled after its window ended: nothing is given back, an extra is charged to the current window', async () => {
      const { clock, store, l } = one(RESERVE_CASES[0] as ReserveCase);
      const r = await l.reserve(req, { cost: 8 });
      clock.advance(60_000);
      await r.settle(1);
      expect((await l.get('r', 'a')).remaining).toBe(10);
      const r2 = await l.reserve(req, { cost: 2 });
      clock.advance(60_000);
      await r2.settle(7);
      expect((await l.get('r', 'a')).remaining).toBe(5);
      await store.close();
    });

    for (const c of RESERVE_CASES) {
      it(`${c.label}: an extra beyond the limit, settled on a key whose state is gone, is charged as a debt`, async () => {
        const { clock, store, l } = one(c);
        const r = await l.reserve(req, { cost: 2 });
        // Long enough for every algorithm's state to be gone (a settle finds the key fresh).
        clock.advance(120_000);
        await r.settle(25);
        const s = await l.get('r', 'a');
        expect(s).toMatchObject({ exists: true, remaining: 0 });
        expect(s.retryAfterMs).toBeGreaterThan(0);
        expect((await l.consume(req)).allowed).toBe(false);
        await store.close();
      });
    }

    it('two rules of one group on one key: a settle charges once and a refund gives back once, as the decision took once', async () => {
      const rule = { key: (q: Req) => q.k, group: 'g', algorithm: 'token-bucket', limit: 10, window: '1m' } as const;
      const { store, l } = setup([
        { name: 'a', ...rule },
        { name: 'b', ...rule },
      ]);
      const r = await l.reserve(req, { cost: 1 });
      await r.settle(8);
      expect((await l.get('a', 'a')).remaining).toBe(2);
      const d = await l.consume(req);
      expect(d.rules.map((x) => x.remaining)).toEqual([1, 1]);
      await l.refund(req, d);
      expect((await l.get('b', 'a')).remaining).toBe(2);
      await store.close();
    });

    for (const c of RESERVE_CASES) boundProperty(c);
    for (const c of RESERVE_CASES) openBoundProperty(c);
  });

  /**
   * The bound: over any interval of admissions, the settled units of the requests admitted
   * in it are at most what the rule admits in that interval plus the largest overshoot
   * (`windows`: per window touched), with one reservation open per key at a time. Checked
   * over every pair of admissions of random runs.
   */
  function boundProperty(c: ReserveCase): void {
    const step = fc.record({
      before: fc.integer({ min: 0, max: 20_000 }),
      estimate: fc.integer({ min: 1, max: 10 }),
      actual: fc.integer({ min: 0, max: 30 }),
      end: fc.constantFrom('settle', 'settle', 'settle', 'cancel', 'leave'),
      during: fc.integer({ min: 0, max: 20_000 }),
    });
    it(`${c.label}: the bound holds over random estimates, actual costs, cancels and clock steps`, async () => {
      let worst = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), async (steps) => {
          const { clock, store, l } = one(c);
          const admitted: { t: number; units: number }[] = [];
          let overshoot = 0;
          for (const s of steps) {
            clock.advance(s.before);
            const r = await l.reserve(req, { cost: s.estimate });
            if (!r.allowed) continue;
            const t = clock.now();
            clock.advance(s.during);
            let units = s.estimate;
            if (s.end === 'settle') {
              await r.settle(s.actual);
              units = s.actual;
            } else if (s.end === 'cancel') {
              await r.cancel();
              units = 0;
            }
            overshoot = Math.max(overshoot, units - s.estimate);
            admitted.push({ t, units });
          }
          await store.close();
          worst = Math.max(
            worst,
            checkBound(c, l, admitted, () => overshoot),
          );
        }),
        { numRuns: o.runs ?? 60 },
      );
      console.log(`${name} ${c.label}: worst ratio of settled units to the bound ${worst.toFixed(3)}`);
    });
  }

  /**
   * The bound with several reservations open on the key at once: random interleavings of
   * reserves, settles (below, at or above the estimate), cancels, reservations left open and
   * clock steps, a settle sometimes asked together with the next reserve (one batch on
   * Redis). Over any interval of admissions, the settled units of the requests admitted in
   * it are at most what the rule admits in it plus the overshoots of the reservations open
   * at once (the largest sum of them open at one admission of the interval).
   */
  function openBoundProperty(c: ReserveCase): void {
    const action = fc.oneof(
      fc.record({ kind: fc.constant('reserve' as const), estimate: fc.integer({ min: 1, max: 6 }) }),
      fc.record({
        kind: fc.constantFrom('settle' as const, 'settle' as const, 'cancel' as const),
        which: fc.nat(),
        actual: fc.integer({ min: 0, max: 20 }),
        together: fc.boolean(),
      }),
      fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 15_000 }) }),
    );
    it(`${c.label}: the bound holds with several reservations open on the key at once`, async () => {
      let worst = 0;
      let most = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 60 }), async (actions) => {
          const { clock, store, l } = one(c);
          const admitted: Row[] = [];
          // The open reservations, with their row in admitted.
          type Open = { r: Reservation; row: Row; estimate: number };
          const open: Open[] = [];
          let seq = 0;
          // A settle held back to be asked with the next reserve, in the same tick.
          let pending: (() => Promise<void>) | undefined;
          const end = (o: Open, actual: number | undefined) => () => {
            const units = actual ?? 0;
            o.row.units = units;
            o.row.over = units - o.estimate;
            o.row.end = ++seq;
            return actual === undefined ? o.r.cancel() : o.r.settle(actual);
          };
          for (const a of actions) {
            if (a.kind === 'advance') clock.advance(a.ms);
            else if (a.kind === 'reserve') {
              const ending = pending?.();
              pending = undefined;
              const r = (await Promise.all([l.reserve(req, { cost: a.estimate }), ending]))[0];
              if (!r.allowed) continue;
              const row = { t: clock.now(), units: a.estimate, end: Number.POSITIVE_INFINITY, over: 0, seq: ++seq };
              admitted.push(row);
              open.push({ r, row, estimate: a.estimate });
              most = Math.max(most, open.length);
            } else if (open.length > 0) {
              const o = open.splice(a.which % open.length, 1)[0] as Open;
              const e = end(o, a.kind === 'cancel' ? undefined : a.actual);
              if (pending === undefined && a.together) pending = e;
              else await e();
            }
          }
          await pending?.();
          await store.close();
          // The overshoots open at once at each admission k: the reservations admitted by then
          // and not yet ended.
          const openAt = admitted.map((k) =>
            admitted.reduce((sum, x) => (x.seq <= k.seq && x.end > k.seq ? sum + Math.max(0, x.over) : sum), 0),
          );
          worst = Math.max(
            worst,
            checkBound(c, l, admitted, (i, j) => Math.max(...openAt.slice(i, j + 1))),
          );
        }),
        { numRuns: o.runs ?? 60 },
      );
      console.log(
        `${name} ${c.label}, several open (up to ${most} at once): worst ratio of settled units to the bound ${worst.toFixed(3)}`,
      );
    });
  }
}

/** An admitted request: its time and the units it settled at (its estimate if left open). */
interface Admission {
  t: number;
  units: number;
}

/** An admission with several open: its place in the order of events, when it ended, its overshoot. */
interface Row extends Admission {
  seq: number;
  end: number;
  over: number;
}

/**
 * Checks the bound over every interval of admissions i..j (in the order admitted): the
 * settled units admitted in it are at most what the rule admits in it plus `extra(i, j)`,
 * the overshoot allowed (`windows`: per window the interval touches). Returns the worst
 * ratio of the units to the bound.
 */
function checkBound(
  c: ReserveCase,
  l: { rules: readonly { spec: RuleSpec }[] },
  admitted: readonly Admission[],
  extra: (i: number, j: number) => number,
): number {
  const spec = l.rules[0]?.spec;
  if (spec === undefined) throw new Error('no rule');
  let worst = 0;
  for (let i = 0; i < admitted.length; i++) {
    let sum = 0;
    for (let j = i; j < admitted.length; j++) {
      sum += (admitted[j] as Admission).units;
      const a = (admitted[i] as Admission).t;
      const b = (admitted[j] as Admission).t;
      const over = extra(i, j);
      const allowed =
        c.bound === 'bucket'
          ? (spec.mode === 'queue' ? spec.queue : spec.burst) + (spec.limit * (b - a)) / spec.windowMs + over
          : (spec.limit + over) * (Math.floor(b / spec.windowMs) - Math.floor(a / spec.windowMs) + 1);
      worst = Math.max(worst, sum / allowed);
      expect(sum).toBeLessThanOrEqual(allowed + 1e-9);
    }
  }
  return worst;
}
