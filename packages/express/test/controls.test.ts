/**
 * What the controls' middleware carries beside itself (their behaviour is the shared
 * control suite's, test/controls): its name, `close`, and the control's core object.
 */
import { concurrency, ManualClock, shed, slowDown } from '@tollgate/express';
import express from 'express';
import request from 'supertest';
import { describe, expect, it } from 'vitest';

describe('Express controls', () => {
  it('slowDown: named, and reset(req) forgets the key so the next request is not delayed', async () => {
    const clock = new ManualClock(0);
    const throttle = slowDown({ window: '1m', delayAfter: 1, delay: 1, clock, skip: (req) => req.path === '/reset' });
    expect(throttle.name).toBe('slowDown');
    const app = express();
    app.use(throttle);
    app.get('/', (req, res) => {
      res.json(req.slowDown ?? null);
    });
    app.post('/reset', async (req, res) => {
      await throttle.reset(req);
      res.end();
    });
    expect((await request(app).get('/')).body).toMatchObject({ hits: 1, delayMs: 0 });
    expect((await request(app).get('/')).body).toMatchObject({ hits: 2, delayMs: 1 });
    await request(app).post('/reset');
    expect((await request(app).get('/')).body).toMatchObject({ hits: 1, delayMs: 0 });
    await throttle.close();
  });

  it('concurrency and shed: named, carrying the limit and the shedder', async () => {
    const limited = concurrency({ max: 2 });
    expect(limited.name).toBe('concurrency');
    expect(limited.limit.held).toBe(0);
    expect(await limited.limit.count(express.request as never)).toMatchObject({ global: undefined });
    await limited.close();
    const shedding = shed({ maxInFlight: 10 });
    expect(shedding.name).toBe('shed');
    expect(shedding.shedder.inFlight).toBe(0);
    expect(shedding.shedder.pressure()).toBe(0);
    shedding.close();
  });
});
