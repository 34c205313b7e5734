import { panelOf, policyFromFlags, type RequestRecord, requestTable, simulate, summarize, timelineSvg } from '@tollgate/cli';
import { describe, expect, it } from 'vitest';

const rec = (i: number, t: number): RequestRecord => ({
  i,
  arrival: t,
  key: 'k',
  cost: 1,
  decision: 'admitted',
  delayMs: 0,
  departure: t,
  rules: [],
  retryAfterMs: 0,
});

describe('SVG timeline', () => {
  it('draws window boundaries of a fixed window, the busiest band, and a seconds axis', async () => {
    const policy = policyFromFlags('fixed-window', { rate: '10/s' });
    const arrivals = Array.from({ length: 30 }, (_, k) => ({ t: 100 * k, key: 'c', cost: 1 }));
    const svg = timelineSvg([panelOf(policy, await simulate(policy, arrivals))], { title: 't' });
    const boundaries = svg.slice(svg.indexOf('<g class="wb">'), svg.indexOf('</g>', svg.indexOf('<g class="wb">')));
    expect(boundaries.match(/<line /g)).toHaveLength(3); // at 1 s, 2 s, 3 s
    expect(svg).toContain('max 10 in 1 s');
    for (const label of ['0 s', '1 s', '2 s', '3 s']) expect(svg).toContain(`>${label}</text>`);
    expect(svg.match(/<g data-decision="admitted">/g)).toHaveLength(30);
  });

  it('escapes names in titles and tooltips', () => {
    const r = { ...rec(0, 0), key: '<b>&"' };
    const svg = timelineSvg([{ title: 'a<b', subtitle: '', records: [r], busiest: summarize([r], 1000).busiest, intervalMs: 1000 }], {
      title: 'x & y',
    });
    expect(svg).toContain('a&lt;b');
    expect(svg).toContain('&lt;b&gt;&amp;&quot;');
    expect(svg).not.toContain('<b>');
  });

  // Regression: Math.max(...records) overflowed the call stack on a trace of a million requests.
  it('regression: a 300 000-request run renders without "Maximum call stack size exceeded"', () => {
    const records = Array.from({ length: 300_000 }, (_, k) => rec(k, k));
    const svg = timelineSvg([{ title: 'big', subtitle: '', records, busiest: summarize(records, 1000).busiest, intervalMs: 1000 }], {
      title: 'big',
    });
    expect(svg).toContain('first 600 of 300000 requests drawn');
    expect(requestTable(records, Number.POSITIVE_INFINITY).split('\n')).toHaveLength(300_002);
  });
});
