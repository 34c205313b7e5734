import { CliError, generateArrivals, parsePattern } from '@tollgate/cli';
import { describe, expect, it } from 'vitest';

const target = { limit: 10, windowMs: 1000 };
const times = (p: string) =>
  parsePattern(p)
    .generate(target)
    .map((a) => a.t);

describe('arrival patterns', () => {
  it('burst at one instant, or spread evenly over a span', () => {
    expect(times('burst 3 at 1.5s')).toEqual([1500, 1500, 1500]);
    expect(times('burst 4 at 100 over 1s')).toEqual([100, 350, 600, 850]);
  });

  it('constant rate: k·W/L for k·W/L < D, rounded to whole ms', () => {
    expect(times('rate 20/s for 200ms from 1s')).toEqual([1000, 1050, 1100, 1150]);
    expect(times('rate 3/s for 1s')).toEqual([0, 333, 667]);
  });

  it('seeded Poisson: same seed, same arrivals; mean rate close to R', () => {
    const a = times('poisson 50/s for 20s seed 7');
    expect(times('poisson 50/s for 20s seed 7')).toEqual(a);
    expect(times('poisson 50/s for 20s seed 8')).not.toEqual(a);
    expect(a.length).toBeGreaterThan(900);
    expect(a.length).toBeLessThan(1100);
    expect(a.every((t, i) => i === 0 || t >= (a[i - 1] as number))).toBe(true);
  });

  it('boundary attack tailored to the window: L before the boundary and L after', () => {
    const t = parsePattern('boundary')
      .generate({ limit: 3, windowMs: 60_000 })
      .map((a) => a.t);
    expect(t).toEqual([54_000, 56_000, 58_000, 60_000, 62_000, 64_000]);
    expect(times('boundary 2 at 2s span 10ms')).toEqual([1990, 1995, 2000, 2005]);
  });

  it('keys, cost, and merging by time', () => {
    const a = generateArrivals([parsePattern('burst 3 at 10 keys 2 key u cost 2'), parsePattern('burst 1 at 5')], target);
    expect(a).toEqual([
      { t: 5, key: 'client', cost: 1 },
      { t: 10, key: 'u-1', cost: 2 },
      { t: 10, key: 'u-2', cost: 2 },
      { t: 10, key: 'u-1', cost: 2 },
    ]);
  });

  it.each([
    ['wave 3', /burst, rate, poisson or boundary/],
    ['burst', /number of requests/],
    ['burst 0', /positive whole number/],
    ['burst 5 at', /without a value/],
    ['burst 5 for 2s', /"for"/],
    ['rate 10/s', /after "for"/],
    ['rate ten for 1s', /a rate after "rate"/],
    ['burst 5 at -1', /a time/],
    ['burst 5 at 1s at 2s', /twice/],
    ['poisson 1/s for 1s seed x', /whole number/],
    ['boundary at 10ms span 100ms', /at least one span after 0/],
    ['rate 1000/ms for 1h', /at most 5000000 arrivals/],
    ['burst 2 at 25h', /a time such as/],
  ])('refuses %j', (text, message) => {
    let err: unknown;
    try {
      parsePattern(text).generate(target);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).code).toBe('TG_CLI_INVALID_PATTERN');
    expect((err as CliError).message).toMatch(message);
  });
});
