/**
 * The playground's server without a browser: how it measures what the limiter did, its
 * form errors, and firing a pattern from the server itself.
 */
import request from 'supertest';
import { afterEach, describe, expect, it } from 'vitest';
import { createPlayground } from '../../examples/playground/app.mjs';

let playground: ReturnType<typeof createPlayground> | undefined;
afterEach(async () => {
  await playground?.close();
  playground = undefined;
});

describe('playground server', () => {
  it('sliding-log showed "max 11 in 1 s" against a limit of 10: the server timed a request apart from its decision', async () => {
    // The clock, scripted: a request whose own reading falls one millisecond before the
    // limiter's (two reads a moment apart that straddle a millisecond) is where the chart
    // showed an eleventh admission inside one window. The arrival must be the decision's time.
    let t = 5000;
    const script: number[] = [];
    playground = createPlayground({ now: () => script.shift() ?? t });
    const { app } = playground;
    const run = (await request(app).post('/api/runs').send({ algorithm: 'sliding-log', rate: '10/s', pattern: 'burst 11 at 0' })).body;
    expect((await request(app).post(`/api/runs/${run.id}/start`)).status).toBe(200);
    for (let i = 0; i < 10; i++) expect((await request(app).post(`/api/hit/${run.id}?i=${i}`)).status).toBe(200);
    // One window later: the first read says 999 ms, the next one 1000 ms.
    t = 6000;
    script.push(5999, 6000);
    await request(app).post(`/api/hit/${run.id}?i=10`);
    const result = (await request(app).get(`/api/runs/${run.id}/result`)).body;
    expect(result.observed.summary.busiest.count).toBeLessThanOrEqual(10);
    expect(result.replay.agree).toBe(result.replay.of);
  });

  it('fires the pattern from the server: a leaky-bucket queue run admits what the simulator predicts', async () => {
    // The run's clock stands still: the burst arrives at one instant, as the pattern says (on a
    // busy machine the real arrivals spread over more than the queue's 50 ms and it drained between them).
    playground = createPlayground({ now: () => 1000 });
    const server = playground.app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const { app } = playground;
      const body = { algorithm: 'leaky-bucket', mode: 'queue', rate: '20/s', queue: '5', pattern: 'burst 12 at 0' };
      const created = await request(server).post('/api/runs').send(body);
      expect(created.body.rule).toEqual({ name: 'leaky-bucket-queue', algorithm: 'leaky-bucket', mode: 'queue', rate: '20/s', queue: 5 });
      const fired = await request(server).post(`/api/runs/${created.body.id}/fire`);
      const lines = fired.text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      const { result } = lines.at(-1);
      const { requests, admitted, delayed, rejected } = result.observed.summary;
      expect({ requests, admitted, delayed, rejected }).toEqual({ requests: 12, admitted: 5, delayed: 5, rejected: 7 });
      expect(created.body.prediction.summary).toMatchObject({ requests: 12, admitted: 5, delayed: 5, rejected: 7 });
      expect(lines.slice(0, -1).at(-1)).toEqual({ answered: 12, of: 12 });
      // Firing twice is refused.
      expect((await request(app).post(`/api/runs/${created.body.id}/fire`)).status).toBe(409);
      // The live view counted the refusals, from @tollgate/otel's metrics.
      const live = (await request(app).get('/api/live')).body;
      expect(live.totals['leaky-bucket-queue']).toBe(7);
      expect(live.svg).toContain('data-policy="leaky-bucket-queue" data-total="7"');
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('runs a sliding-buckets rule with the blocks the form gives', async () => {
    playground = createPlayground({ now: () => 1000 });
    const { app } = playground;
    const body = { algorithm: 'sliding-buckets', rate: '10/s', buckets: '5', pattern: 'burst 12 at 0' };
    const created = await request(app).post('/api/runs').send(body);
    expect(created.body.rule).toEqual({ name: 'sliding-buckets', algorithm: 'sliding-buckets', rate: '10/s', buckets: 5 });
    expect(created.body.prediction.summary).toMatchObject({ requests: 12, admitted: 10, rejected: 2 });
  });

  it('answers a bad form with the field and a message in the words of the page', async () => {
    playground = createPlayground();
    const { app } = playground;
    const cases: [Record<string, string>, string, RegExp][] = [
      [{ algorithm: 'leaky-queue', rate: '10/s', pattern: 'burst 1' }, 'algorithm', /^Algorithm: pick one of fixed-window, .*leaky-bucket/],
      [{ algorithm: 'leaky-bucket', mode: 'shaper', rate: '10/s', pattern: 'burst 1' }, 'mode', /^Mode: /],
      [{ algorithm: 'token-bucket', rate: 'ten a second', pattern: 'burst 1' }, 'rate', /^Limit: write a count per duration/],
      [{ algorithm: 'token-bucket', rate: '10/s', burst: '2.5', pattern: 'burst 1' }, 'burst', /^Burst: write a whole number/],
      [
        { algorithm: 'leaky-bucket', mode: 'queue', rate: '10/s', queue: '-1', pattern: 'burst 1' },
        'queue',
        /^Queue: write a whole number/,
      ],
      // Bug: a rule the limiter refuses was shown as the raw error, its internal path first.
      [{ algorithm: 'token-bucket', rate: '9000000000/d', pattern: 'burst 1' }, 'rate', /^This rule is refused: expected a limit/],
      [{ algorithm: 'sliding-buckets', rate: '10/s', buckets: '0', pattern: 'burst 1' }, 'buckets', /^Buckets: write a whole number/],
      [{ algorithm: 'sliding-buckets', rate: '5/999ms', pattern: 'burst 1' }, 'buckets', /^This rule is refused: .*buckets: 9/],
      [{ algorithm: 'sliding-log', rate: '10/s', pattern: 'wave 3' }, 'pattern', /^Arrival pattern: "wave 3" is not a pattern/],
      [{ algorithm: 'sliding-log', rate: '10/s', pattern: 'burst 401 at 0' }, 'pattern', /at most 400 requests within 30 s/],
    ];
    for (const [body, field, message] of cases) {
      const res = await request(app).post('/api/runs').send(body);
      expect(res.status).toBe(400);
      expect(res.body.error.field).toBe(field);
      expect(res.body.error.message).toMatch(message);
      // Never the CLI's flags or error codes.
      expect(res.body.error.message).not.toMatch(/--[a-z]|TG_/);
    }
  });
});
