/**
 * createFetch behaviour, driven by a scripted inner fetch on a virtual clock: give-up
 * rules, body replay, aborts, deadlines, RateLimit holds, pacing, option validation.
 */
import { createFetch, type GiveUpEvent, TollgateClientError, type WaitEvent } from '@tollgate/client';
import { describe, expect, it } from 'vitest';
import { VirtualScheduler } from './helpers/virtual-scheduler.js';

const T0 = 1_700_000_040_000;

interface Seen {
  at: number;
  url: string;
  method: string;
  headers: Headers;
  body: string | undefined;
}

type Step = Response | Error | ((seen: Seen) => Response | Error | Promise<Response | Error>);

/** An inner fetch that answers with `steps` in turn (the last one repeats) and records each call. */
function scripted(clock: { now(): number }, steps: Step[]) {
  const seen: Seen[] = [];
  const inner = (async (input: Parameters<typeof fetch>[0], init?: RequestInit) => {
    const req = new Request(input, init);
    const body = req.body ? await req.text() : undefined;
    const s: Seen = { at: clock.now(), url: req.url, method: req.method, headers: req.headers, body };
    seen.push(s);
    let step = steps[Math.min(seen.length - 1, steps.length - 1)] as Step;
    if (typeof step === 'function') step = await step(s);
    if (step instanceof Error) throw step;
    return step.clone();
  }) as typeof fetch;
  return { inner, seen };
}

const r429 = (headers: Record<string, string> = {}) => new Response('slow down', { status: 429, headers });
const ok = (headers: Record<string, string> = {}) => new Response('ok', { status: 200, headers });

function setup(steps: Step[], options: Parameters<typeof createFetch>[0] = {}) {
  const sched = new VirtualScheduler(T0);
  const { inner, seen } = scripted(sched.clock, steps);
  const gaveUp: GiveUpEvent[] = [];
  const waits: WaitEvent[] = [];
  const client = createFetch({
    fetch: sched.track(inner),
    clock: sched.clock,
    sleep: sched.sleep,
    random: () => 0.5,
    onGiveUp: (e) => gaveUp.push(e),
    onWait: (e) => waits.push(e),
    ...options,
  });
  return { sched, seen, client, gaveUp, waits };
}

describe('retries and giving up', () => {
  it('hands back the last 429 after retries + 1 attempts, waiting base·2^(n-1)·random between them', async () => {
    const { sched, seen, client, gaveUp } = setup([r429()], { retries: 3 });
    const p = client('https://api.test/a');
    await sched.run();
    expect((await p).status).toBe(429);
    expect(seen.map((s) => s.at - T0)).toEqual([0, 250, 750, 1750]); // 0.5·500, 0.5·1000, 0.5·2000
    expect(gaveUp).toMatchObject([{ reason: 'attempts', attempts: 4, status: 429 }]);
  });

  it('caps the exponential ceiling at capMs', async () => {
    const { sched, seen, client } = setup([r429()], { retries: 6, baseMs: 1000, capMs: 4000, random: () => 1 });
    const p = client('https://api.test/a');
    await sched.run();
    await p;
    const gaps = seen.slice(1).map((s, i) => s.at - (seen[i] as Seen).at);
    expect(gaps).toEqual([1000, 2000, 4000, 4000, 4000, 4000]);
  });

  it('503 is retried like 429; other statuses are returned at once', async () => {
    const a = setup([new Response('', { status: 503 }), ok()]);
    const pa = a.client('https://api.test/a');
    await a.sched.run();
    expect((await pa).status).toBe(200);
    const b = setup([new Response('', { status: 500 })]);
    const pb = b.client('https://api.test/a');
    await b.sched.run();
    expect((await pb).status).toBe(500);
    expect(b.seen).toHaveLength(1);
  });

  it('a POST refused with 429 is not retried (not idempotent); its response is handed back', async () => {
    const { sched, seen, client, gaveUp } = setup([r429(), ok()]);
    const p = client('https://api.test/orders', { method: 'POST', body: 'x' });
    await sched.run();
    expect((await p).status).toBe(429);
    expect(seen).toHaveLength(1);
    expect(gaveUp).toMatchObject([{ reason: 'not-retryable' }]);
  });

  it('network errors are retried for GET; after the last attempt the original error is thrown', async () => {
    const boom = new TypeError('fetch failed');
    const { sched, seen, client } = setup([boom], { retries: 2 });
    const p = client('https://api.test/a').catch((e: unknown) => e);
    await sched.run();
    expect(await p).toBe(boom);
    expect(seen).toHaveLength(3);
  });

  it('onRetry reports each retry: number, attempt, wait, reason', async () => {
    const events: unknown[] = [];
    const { sched, client } = setup([new TypeError('fetch failed'), r429({ 'retry-after': '2' }), ok()], {
      onRetry: (e) => events.push(e),
    });
    const p = client('https://api.test/a');
    await sched.run();
    expect((await p).status).toBe(200);
    expect(events).toMatchObject([
      { retry: 1, attempt: 2, waitMs: 250, reason: 'network', error: expect.any(TypeError), method: 'GET', url: 'https://api.test/a' },
      { retry: 2, attempt: 3, waitMs: 2500, reason: 'status', status: 429, serverWaitMs: 2000 },
    ]);
  });

  // Regression (draft-ietf-httpapi-ratelimit-headers-11): the client waited the longer of
  // Retry-After and the policy's t; Retry-After now takes precedence, both ways.
  it("Retry-After takes precedence over a RateLimit policy's t on a refusal, longer or shorter", async () => {
    for (const [retryAfter, t, serverWaitMs] of [
      ['2', '30', 2000],
      ['30', '2', 30_000],
    ] as const) {
      const events: { serverWaitMs?: number; waitMs: number }[] = [];
      const refusal = r429({ 'retry-after': retryAfter, ratelimit: `"user";r=0;t=${t}`, 'ratelimit-policy': '"user";q=10;w=60' });
      const { sched, seen, client } = setup([refusal, ok()], { random: () => 0, onRetry: (e) => events.push(e) });
      const p = client('https://api.test/a');
      await sched.run();
      expect((await p).status).toBe(200);
      expect(events).toMatchObject([{ serverWaitMs, waitMs: serverWaitMs }]);
      expect((seen[1] as Seen).at - T0).toBe(serverWaitMs);
    }
  });

  it('retries after a Retry-After are jittered: never before it, spread over the backoff ceiling after it', async () => {
    const at = async (random: number) => {
      const { sched, seen, client } = setup([r429({ 'retry-after': '2', ratelimit: '"user";r=0;t=2' }), ok()], { random: () => random });
      const p = client('https://api.test/a');
      await sched.run();
      await p;
      return (seen[1] as Seen).at - T0;
    };
    expect([await at(0), await at(0.5), await at(1)]).toEqual([2000, 2250, 2500]); // 2 s + random · base 500
  });

  it('a Retry-After longer than maxWaitMs ends the retries at once', async () => {
    const { sched, seen, client, gaveUp } = setup([r429({ 'retry-after': '120' }), ok()], { maxWaitMs: 60_000 });
    const p = client('https://api.test/a');
    await sched.run();
    expect((await p).status).toBe(429);
    expect(seen).toHaveLength(1);
    expect(sched.clock.now()).toBe(T0);
    expect(gaveUp).toMatchObject([{ reason: 'max-wait' }]);
  });

  it('a wait that would pass deadlineMs is not started', async () => {
    const { sched, seen, client, gaveUp } = setup([r429({ 'retry-after': '30' }), ok()], { deadlineMs: 10_000 });
    const p = client('https://api.test/a');
    await sched.run();
    expect((await p).status).toBe(429);
    expect(seen).toHaveLength(1);
    expect(gaveUp).toMatchObject([{ reason: 'deadline' }]);
  });

  it('a malformed or past Retry-After falls back to full-jitter backoff (never an instant retry storm)', async () => {
    for (const value of ['soon', '-5', 'Wed, 21 Oct 2015 07:28:00 GMT', '0']) {
      const { sched, seen, client } = setup([r429({ 'retry-after': value }), ok()]);
      const p = client('https://api.test/a');
      await sched.run();
      expect((await p).status).toBe(200);
      expect((seen[1] as Seen).at - T0).toBe(250); // random 0.5 · base 500
    }
  });
});

describe('bodies', () => {
  it('a PUT with an in-memory body is replayed byte for byte', async () => {
    const { sched, seen, client } = setup([r429(), ok()]);
    const p = client('https://api.test/doc', { method: 'PUT', body: new Blob(['hello']) });
    await sched.run();
    expect((await p).status).toBe(200);
    expect(seen.map((s) => s.body)).toEqual(['hello', 'hello']);
  });

  it('a PUT whose body is a stream is sent once and not replayed', async () => {
    const { sched, seen, client, gaveUp } = setup([r429(), ok()]);
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode('chunk'));
        c.close();
      },
    });
    const p = client('https://api.test/doc', { method: 'PUT', body: stream, duplex: 'half' } as RequestInit);
    await sched.run();
    expect((await p).status).toBe(429);
    expect(seen).toHaveLength(1);
    expect(gaveUp[0]?.reason).toBe('not-retryable');
  });

  it('a Request object with a body is replayed through clone()', async () => {
    const { sched, seen, client } = setup([r429(), ok()]);
    const p = client(new Request('https://api.test/doc', { method: 'PUT', body: 'payload' }));
    await sched.run();
    expect((await p).status).toBe(200);
    expect(seen.map((s) => s.body)).toEqual(['payload', 'payload']);
  });

  it('an unparseable URL is handed to the inner fetch unchanged (its own error)', async () => {
    const { client, seen } = setup([ok()]);
    await expect(client('not a url')).rejects.toThrow(TypeError);
    expect(seen).toHaveLength(0);
  });
});

describe('AbortSignal', () => {
  it('aborting during a retry wait rejects at once with the signal reason and leaves no timer', async () => {
    const { sched, seen, client } = setup([r429({ 'retry-after': '10' }), ok()]);
    const ac = new AbortController();
    const p = client('https://api.test/a', { signal: ac.signal }).catch((e: unknown) => e);
    await sched.settle();
    expect(sched.pending).toBe(1);
    const reason = new Error('user gave up');
    ac.abort(reason);
    expect(await p).toBe(reason);
    expect(sched.pending).toBe(0);
    expect(seen).toHaveLength(1);
  });

  it('aborting while queued behind a pacing wait leaves the queue; the calls behind it still go', async () => {
    const { sched, seen, client } = setup([ok()], { pace: '1/s' });
    const ac = new AbortController();
    const first = client('https://api.test/1');
    const second = client('https://api.test/2', { signal: ac.signal }).catch((e: unknown) => e);
    const third = client('https://api.test/3');
    await sched.settle();
    ac.abort(new Error('not needed'));
    expect(((await second) as Error).message).toBe('not needed');
    await sched.run();
    await Promise.all([first, third]);
    expect(seen.map((s) => [new URL(s.url).pathname, s.at - T0])).toEqual([
      ['/1', 0],
      ['/3', 1000],
    ]);
  });

  it('an already-aborted signal sends nothing', async () => {
    const { client, seen } = setup([ok()], { pace: '1/s' });
    const ac = new AbortController();
    ac.abort(new Error('no'));
    await expect(client('https://api.test/a', { signal: ac.signal })).rejects.toThrow('no');
    expect(seen).toHaveLength(0);
  });
});

describe('RateLimit awareness', () => {
  it('r=0 on a 200: the next request to that origin waits t; another origin does not', async () => {
    const { sched, seen, client, waits } = setup([ok({ ratelimit: '"user";r=0;t=7', 'ratelimit-policy': '"user";q=10;w=60' }), ok()]);
    await Promise.all([client('https://api.test/a'), sched.run()]);
    const next = client('https://api.test/b');
    const other = client('https://other.test/c');
    await sched.run();
    await Promise.all([next, other]);
    expect(seen.map((s) => [new URL(s.url).pathname, s.at - T0])).toEqual([
      ['/a', 0],
      ['/c', 0],
      ['/b', 7000],
    ]);
    expect(waits).toMatchObject([{ reason: 'ratelimit', waitMs: 7000, scope: 'https://api.test' }]);
  });

  it('after a hold one request probes; the others wait for its response instead of all leaving at once', async () => {
    const used = () => ok({ ratelimit: '"user";r=0;t=2' });
    const { sched, seen, client } = setup([used(), used(), ok({ ratelimit: '"user";r=5;t=60' })]);
    await Promise.all([client('https://api.test/first'), sched.run()]);
    const calls = ['a', 'b', 'c'].map((x) => client(`https://api.test/${x}`));
    await sched.run();
    await Promise.all(calls);
    // a probes at 2 s and is told r=0 again; b probes after the new hold; then c goes with b's good news.
    expect(seen.map((s) => [new URL(s.url).pathname, s.at - T0])).toEqual([
      ['/first', 0],
      ['/a', 2000],
      ['/b', 4000],
      ['/c', 4000],
    ]);
  });

  it('a call queued behind a slow probe gives up when its deadline passes in the queue', async () => {
    const sched = new VirtualScheduler(T0);
    const { inner, seen } = scripted(sched.clock, [
      ok({ ratelimit: '"user";r=0;t=2' }),
      async () => {
        await sched.sleep(10_000); // the probe's answer takes 10 s
        return ok();
      },
    ]);
    const client = createFetch({ fetch: inner, deadlineMs: 5000, clock: sched.clock, sleep: sched.sleep });
    await Promise.all([client('https://api.test/first'), sched.run()]);
    const probe = client('https://api.test/probe');
    const queued = client('https://api.test/queued').catch((e: unknown) => e);
    await sched.advance(5000);
    const err = await queued;
    expect((err as TollgateClientError).code).toBe('TGC_DEADLINE_EXCEEDED');
    await sched.run();
    expect((await probe).status).toBe(200);
    expect(seen.map((s) => new URL(s.url).pathname)).toEqual(['/first', '/probe']);
  });

  it('X-RateLimit-Reset as epoch seconds (GitHub style) holds until that instant', async () => {
    const reset = String((T0 + 42_000) / 1000);
    const { sched, seen, client } = setup([ok({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset }), ok()]);
    await Promise.all([client('https://api.test/a'), sched.run()]);
    const p = client('https://api.test/b');
    await sched.run();
    await p;
    expect((seen[1] as Seen).at - T0).toBe(42_000);
  });

  it('malformed RateLimit fields are ignored: no hold, no error', async () => {
    const { sched, seen, client } = setup([ok({ ratelimit: '"user";r=0;t=', 'x-ratelimit-remaining': 'zero' }), ok()]);
    await Promise.all([client('https://api.test/a'), sched.run()]);
    const p = client('https://api.test/b');
    await sched.run();
    expect((await p).status).toBe(200);
    expect((seen[1] as Seen).at).toBe(T0);
  });

  // draft-ietf-httpapi-ratelimit-headers-11: a response served from a cache carries the
  // fields of the moment it was stored.
  it('RateLimit on a response served from a cache (Age > 0) is ignored; Age 0 or malformed is not', async () => {
    for (const [age, held] of [
      ['5', 0],
      ['0', 7000],
      ['soon', 7000],
    ] as const) {
      const { sched, seen, client } = setup([
        ok({ age, ratelimit: '"user";r=0;t=7', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '7' }),
        ok(),
      ]);
      await Promise.all([client('https://api.test/a'), sched.run()]);
      const p = client('https://api.test/b');
      await sched.run();
      await p;
      expect((seen[1] as Seen).at - T0, `Age: ${age}`).toBe(held);
    }
  });

  it('an r=0 hint longer than maxWaitMs is ignored', async () => {
    const { sched, seen, client } = setup([ok({ ratelimit: '"day";r=0;t=86400' }), ok()]);
    await Promise.all([client('https://api.test/a'), sched.run()]);
    const p = client('https://api.test/b');
    await sched.run();
    await p;
    expect((seen[1] as Seen).at).toBe(T0);
  });
});

describe('pacing', () => {
  it('"4/s" spaces requests evenly, 250 ms apart, in call order', async () => {
    const { sched, seen, client } = setup([ok()], { pace: '4/s' });
    const calls = [0, 1, 2, 3, 4].map((i) => client(`https://api.test/${i}`));
    await sched.run();
    await Promise.all(calls);
    expect(seen.map((s) => [new URL(s.url).pathname, s.at - T0])).toEqual([
      ['/0', 0],
      ['/1', 250],
      ['/2', 500],
      ['/3', 750],
      ['/4', 1000],
    ]);
  });

  it('any algorithm: a token bucket with burst 3 lets 3 go at once, then 1 per 500 ms', async () => {
    const { sched, seen, client } = setup([ok()], { pace: { name: 'api', limit: 2, window: '1s', algorithm: 'token-bucket', burst: 3 } });
    const calls = [0, 1, 2, 3, 4].map((i) => client(`https://api.test/${i}`));
    await sched.run();
    await Promise.all(calls);
    expect(seen.map((s) => s.at - T0)).toEqual([0, 0, 0, 500, 1000]);
  });

  it('a leaky-bucket queue rule delays each request to its departure', async () => {
    const { sched, seen, client } = setup([ok()], {
      pace: { name: 'q', limit: 2, window: '1s', algorithm: 'leaky-bucket', mode: 'queue', queue: 10 },
    });
    const calls = [0, 1, 2].map((i) => client(`https://api.test/${i}`));
    await sched.run();
    await Promise.all(calls);
    expect(seen.map((s) => s.at - T0)).toEqual([500, 1000, 1500]);
  });

  it('pacing is per origin by default, and per the scope function when given', async () => {
    const a = setup([ok()], { pace: '1/s' });
    const ca = [a.client('https://one.test/'), a.client('https://two.test/')];
    await a.sched.run();
    await Promise.all(ca);
    expect(a.seen.map((s) => s.at - T0)).toEqual([0, 0]);
    const b = setup([ok()], { pace: '1/s', scope: () => 'everything' });
    const cb = [b.client('https://one.test/'), b.client('https://two.test/')];
    await b.sched.run();
    await Promise.all(cb);
    expect(b.seen.map((s) => s.at - T0)).toEqual([0, 1000]);
  });

  it('a first request whose pacing wait passes the deadline is not sent: TGC_DEADLINE_EXCEEDED', async () => {
    const { sched, seen, client } = setup([ok()], { pace: '1/min', deadlineMs: 5000 });
    const first = client('https://api.test/1');
    const second = client('https://api.test/2').catch((e: unknown) => e);
    await sched.run();
    expect((await first).status).toBe(200);
    const err = await second;
    expect(err).toBeInstanceOf(TollgateClientError);
    expect((err as TollgateClientError).code).toBe('TGC_DEADLINE_EXCEEDED');
    expect(seen).toHaveLength(1);
  });

  it('a pacing rule that can never admit the request fails with TGC_PACE_UNSATISFIABLE', async () => {
    const { sched, client } = setup([ok()], { pace: { name: 'p', rate: '2/s', cost: () => 5 } });
    const p = client('https://api.test/').catch((e: unknown) => e);
    await sched.run();
    expect(((await p) as TollgateClientError).code).toBe('TGC_PACE_UNSATISFIABLE');
  });
});

describe('options', () => {
  it.each([
    [{ retries: -1 }, 'TGC_INVALID_OPTION', 'createFetch.retries'],
    [{ retries: 1.5 }, 'TGC_INVALID_OPTION', 'createFetch.retries'],
    [{ baseMs: 0 }, 'TGC_INVALID_OPTION', 'createFetch.baseMs'],
    [{ capMs: Number.NaN }, 'TGC_INVALID_OPTION', 'createFetch.capMs'],
    [{ jitter: 'equal' }, 'TGC_INVALID_OPTION', 'createFetch.jitter'],
    [{ statuses: [429, 99] }, 'TGC_INVALID_OPTION', 'createFetch.statuses'],
    [{ idempotencyKey: 'yes' }, 'TGC_INVALID_OPTION', 'createFetch.idempotencyKey'],
    [{ pace: 10 }, 'TGC_INVALID_OPTION', 'createFetch.pace'],
    [{ random: 0.5 }, 'TGC_INVALID_OPTION', 'createFetch.random'],
    [{ clock: {} }, 'TGC_INVALID_OPTION', 'createFetch.clock'],
    [{ retrys: 3 }, 'TGC_UNKNOWN_OPTION', 'createFetch.retrys'],
  ])('%j is refused with %s at %s', (options, code, path) => {
    let caught: unknown;
    try {
      createFetch(options as never);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(TollgateClientError);
    expect(caught).toMatchObject({ code, path });
    expect((caught as Error).message).toMatch(/expected .+, received .+\. \S/);
  });

  it('a bad pacing rate is refused at construction by the core (TG_INVALID_RATE)', () => {
    // @ts-expect-error 'fast' is not a rate, and the type says so too
    expect(() => createFetch({ pace: 'fast' })).toThrow(expect.objectContaining({ code: 'TG_INVALID_RATE' }));
  });
});
