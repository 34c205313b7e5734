/**
 * A failing observer never breaks a decision: a real SDK MeterProvider whose view throws on
 * every `add()` or `record()`, and a label function that rejects, behind real HTTP
 * requests. Requests are answered as without metrics, nothing escapes as an uncaught
 * exception or unhandled rejection, and the failure is counted and warned about once.
 */

import { readFileSync } from 'node:fs';
import { InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { ManualClock } from '@tollgate/core';
import { rateLimit } from '@tollgate/express';
import tollgate from '@tollgate/fastify';
import { RECORD_FAILED_WARNING, type TollgateMetrics, tollgateMetrics } from '@tollgate/otel';
import express from 'express';
import Fastify from 'fastify';
import request from 'supertest';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const broken = {
  process(): never {
    throw new Error('broken view');
  },
};

/** A real SDK provider whose views make the named instruments throw on every recording. */
function brokenProvider(instrumentNames: string[]): MeterProvider {
  const exporter = new InMemoryMetricExporter(0);
  return new MeterProvider({
    readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 })],
    views: instrumentNames.map((instrumentName) => ({ instrumentName, attributesProcessors: [broken] })),
  });
}

let recorder: TollgateMetrics | undefined;
let provider: MeterProvider | undefined;
const escaped: string[] = [];
const warnings: string[] = [];
const onEscape = (err: unknown) => escaped.push(String(err));
const onWarning = (w: Error & { code?: string }) => {
  if (w.code === RECORD_FAILED_WARNING) warnings.push(w.message);
};

beforeEach(() => {
  process.on('uncaughtException', onEscape);
  process.on('unhandledRejection', onEscape);
  process.on('warning', onWarning);
});

afterEach(async () => {
  process.off('uncaughtException', onEscape);
  process.off('unhandledRejection', onEscape);
  process.off('warning', onWarning);
  escaped.length = 0;
  warnings.length = 0;
  recorder?.stop();
  recorder = undefined;
  await provider?.shutdown();
  provider = undefined;
});

/** Lets nextTick throws, unhandled rejections and warnings come out. */
const settle = async () => {
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setTimeout(r, 5));
};

const rules = [{ name: 'ip', limit: 3, window: '1m' as const }];
/** A clock that stands still: a run's requests fall in one window wherever a minute ends (its statuses are exact). */
const still = () => new ManualClock(0);

describe('a failing observer', () => {
  it('a counter whose add() throws and a histogram whose record() throws: Express answers as without metrics, one warning', async () => {
    provider = brokenProvider(['tollgate.requests', 'tollgate.decision.duration']);
    recorder = tollgateMetrics({ meterProvider: provider });
    const app = express();
    app.use(rateLimit({ rules, name: 'api', clock: still() }));
    app.get('/', (_req, res) => res.send('ok'));
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await request(app).get('/')).status);
    await settle();
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    expect(escaped).toEqual([]);
    expect(recorder.failures).toBe(5);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/could not record a metric/);
  });

  it('the same on Fastify, with the per-policy counter broken', async () => {
    provider = brokenProvider(['tollgate.decisions']);
    recorder = tollgateMetrics({ meterProvider: provider });
    const app = Fastify();
    await app.register(tollgate, { rules, clock: still() });
    app.get('/', async () => 'ok');
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await app.inject('/')).statusCode);
    await app.close();
    await settle();
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(escaped).toEqual([]);
    expect(recorder.failures).toBe(4);
    expect(warnings).toHaveLength(1);
  });

  it('an async label function that rejects: no unhandled rejection, counted, warned once', async () => {
    provider = brokenProvider([]);
    recorder = tollgateMetrics({
      meterProvider: provider,
      key: { name: 'tenant', get: (async () => Promise.reject(new Error('label'))) as never },
    });
    const app = express();
    app.use(rateLimit({ rules, name: 'labels' }));
    app.get('/', (_req, res) => res.send('ok'));
    for (let i = 0; i < 3; i++) expect((await request(app).get('/')).status).toBe(200);
    await settle();
    expect(escaped).toEqual([]);
    expect(recorder.failures).toBe(3);
    expect(warnings).toHaveLength(1);
  });

  it('an exporter that throws on every export: requests answered as without metrics, nothing escapes', async () => {
    let exports = 0;
    let exported: () => void = () => {};
    const firstExport = new Promise<void>((r) => {
      exported = r;
    });
    const exporter = {
      export(): never {
        exports++;
        exported();
        throw new Error('broken exporter');
      },
      forceFlush: async () => {},
      shutdown: async () => {},
    };
    // The SDK exports on its own timer: the test waits for the first export, not for a time.
    provider = new MeterProvider({ readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 100 })] });
    recorder = tollgateMetrics({ meterProvider: provider });
    const app = express();
    app.use(rateLimit({ rules, name: 'exported', clock: still() }));
    app.get('/', (_req, res) => res.send('ok'));
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await request(app).get('/')).status);
    await firstExport;
    await settle();
    expect(exports).toBeGreaterThan(0);
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(escaped).toEqual([]);
    expect(recorder.failures).toBe(0);
  });

  it('its warning code is documented with the process warnings', () => {
    const docs = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
    expect(docs).toContain(`\`${RECORD_FAILED_WARNING}\``);
  });
});
