/**
 * The Prometheus example (examples/metrics): a scripted burst against the real Express
 * app, then a scrape of GET /metrics, parsed as Prometheus text, whose counters must be
 * exactly what the burst did.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { burst, startMetricsApp } from '../../examples/metrics/app.mjs';

/** Samples of a Prometheus text exposition: name, labels and value of each line. */
function parse(text: string): { name: string; labels: Record<string, string>; value: number }[] {
  const samples = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1] as string] = l[2] as string;
    samples.push({ name: m[1] as string, labels, value: Number(m[3]) });
  }
  return samples;
}

describe('examples/metrics: /metrics after a scripted burst', () => {
  let app: Awaited<ReturnType<typeof startMetricsApp>>;
  beforeAll(async () => {
    // `Date` stands still (the clock tollgate reads by default; timers and sockets stay real):
    // the burst falls in one 10 s window wherever one ends, so its counts are exact.
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.UTC(2026, 0, 1, 0, 0, 1));
    app = await startMetricsApp({ port: 0 });
  });
  afterAll(async () => {
    await app?.close();
    vi.useRealTimers();
  });

  it('counts each tenant’s admitted and refused requests, each policy’s verdicts and every decision’s latency', async () => {
    const statuses = await burst(app.url, { acme: 8, globex: 3 });
    // 5 per 10 s per API key: acme's last 3 are refused.
    expect(statuses).toEqual({ acme: [200, 200, 200, 200, 200, 429, 429, 429], globex: [200, 200, 200] });

    const res = await fetch(new URL('metrics', app.url));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    const samples = parse(text);
    const value = (name: string, labels: Record<string, string>) =>
      samples
        .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
        .reduce((n, s) => n + s.value, 0);

    const api = { tollgate_limiter: 'api' };
    expect(value('tollgate_requests_total', { ...api, tenant: 'acme', tollgate_outcome: 'admitted' })).toBe(5);
    expect(value('tollgate_requests_total', { ...api, tenant: 'acme', tollgate_outcome: 'refused' })).toBe(3);
    expect(value('tollgate_requests_total', { ...api, tenant: 'globex', tollgate_outcome: 'admitted' })).toBe(3);
    expect(value('tollgate_requests_total', { ...api, tenant: 'globex', tollgate_outcome: 'refused' })).toBe(0);
    expect(value('tollgate_decisions_total', { ...api, tollgate_policy: 'per-key', tollgate_outcome: 'refused' })).toBe(3);
    expect(value('tollgate_decisions_total', { ...api, tollgate_policy: 'global', tollgate_outcome: 'admitted' })).toBe(11);
    expect(value('tollgate_decision_duration_count', api)).toBe(11);
    expect(value('tollgate_decision_duration_bucket', { ...api, le: '+Inf' })).toBe(11);
    // The controls in front: every request passed them, and nothing is in flight after the burst.
    expect(value('tollgate_requests_total', { tollgate_limiter: 'workers', tollgate_outcome: 'admitted' })).toBe(11);
    expect(samples.find((s) => s.name === 'tollgate_concurrency_slots' && s.labels.tollgate_limiter === 'workers')?.value).toBe(0);
    expect(samples.find((s) => s.name === 'tollgate_shed_in_flight' && s.labels.tollgate_limiter === 'shed')?.value).toBe(0);
    // The API key is never a label; the tenant is, because the app asked for it.
    expect(text).not.toContain('key-acme');
  });
});
