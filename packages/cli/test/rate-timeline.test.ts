import { simulateByteRate } from '@tollgate/cli';
import { describe, expect, it } from 'vitest';
import { cli } from './helpers.js';

describe('tollgate rate-timeline', () => {
  it('draws the textbook case: link speed for B / (M - R) = 2 s, then R', async () => {
    const r = await cli([
      'rate-timeline',
      '--rate',
      '2MB/s',
      '--burst',
      '16MB',
      '--link',
      '10MB/s',
      '--duration',
      '5s',
      '--svg',
      'out.svg',
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout()).toMatch(/full link speed for (1\.99|2\.00) s \(burst \/ \(link - rate\) = 2\.00 s\), then 2 MB\/s/);
    expect(r.stdout()).toMatch(/1\.0 s\s+10 MB\s+10 MB\/s/);
    expect(r.stdout()).toMatch(/4\.0 s\s+2[34](\.\d+)? MB\s+2 MB\/s/);
    const svg = r.written.get('out.svg') ?? '';
    expect(svg).toContain('<svg');
    expect(svg).toMatch(/bucket empty after (1\.99|2\.00) s/);
  });

  it('keeps burst + rate·T in every window of the run, and after adds its bytes at link speed', async () => {
    const run = await simulateByteRate({ rate: '1MB/s', burst: '2MB', link: '8MB/s', after: '1MB', durationMs: 3000 });
    for (const [ti, bi] of run.samples)
      for (const [tj, bj] of run.samples) if (tj > ti) expect(bj - bi).toBeLessThanOrEqual(3_000_000 + 1000 * (tj - ti) + 65_536);
    expect(run.predictedFullSpeedMs).toBeCloseTo((3_000_000 / 7_000_000) * 1000, 3);
    expect(Math.abs(run.fullSpeedMs - run.predictedFullSpeedMs)).toBeLessThanOrEqual(20);
  });

  it('refuses a bad size with TG_INVALID_SIZE and a missing rate with a usage error', async () => {
    const bad = await cli(['rate-timeline', '--rate', '2Mb/s']);
    expect(bad.code).toBe(2);
    expect(bad.stderr()).toContain('TG_INVALID_SIZE');
    const none = await cli(['rate-timeline']);
    expect(none.code).toBe(2);
    expect(none.stderr()).toContain('TG_CLI_INVALID_ARGUMENT');
  });
});
