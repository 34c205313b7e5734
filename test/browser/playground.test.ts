/**
 * The playground (examples/playground) in a real browser: Debian's headless Chromium
 * driven by playwright-core (never a downloaded browser; `.ci/run` installs `chromium`).
 * Each test fires a pattern the way a user does and reads the page: the charts, the
 * summary table, the status line and the live view.
 */
import { mkdir } from 'node:fs/promises';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlayground } from '../../examples/playground/app.mjs';

const ARTIFACTS = new URL('../artifacts/', import.meta.url);

describe('playground in headless Chromium', () => {
  let playground: Awaited<ReturnType<typeof startPlayground>>;
  let browser: Browser;
  /** While set, the playground's clock stands still there (it never goes back: it was read from the real one). */
  let held: number | undefined;

  beforeAll(async () => {
    playground = await startPlayground({ port: 0, now: () => held ?? performance.now() });
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
  });

  afterAll(async () => {
    await browser?.close();
    await playground?.close();
  });

  async function open(): Promise<Page> {
    const page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
    await page.goto(playground.url);
    return page;
  }

  async function fire(page: Page, o: { algorithm: string; mode?: string; rate: string; queue?: string; pattern: string }): Promise<string> {
    await page.selectOption('#algorithm', o.algorithm);
    if (o.mode !== undefined) await page.selectOption('#mode', o.mode);
    await page.fill('#rate', o.rate);
    if (o.queue !== undefined) await page.fill('#queue', o.queue);
    await page.fill('#pattern', o.pattern);
    await page.click('#fire');
    await page.waitForSelector('#results[data-state="done"], #results[data-state="failed"]', { timeout: 20_000 });
    return (await page.getAttribute('#results', 'data-state')) as string;
  }

  const count = (page: Page, chart: string, decision: string) => page.locator(`#${chart} [data-decision="${decision}"]`).count();
  /** requests, admitted, delayed, rejected, max in any window: of the server's row, then the prediction's. */
  const rows = async (page: Page) =>
    Promise.all(
      [0, 1].map(async (k) => (await page.locator('#summary tbody tr').nth(k).locator('td').allTextContents()).slice(0, 5).map(Number)),
    );

  it('offers the algorithm names a rule takes, and the leaky bucket’s two modes', async () => {
    const page = await open();
    expect(await page.title()).toBe('tollgate playground');
    const names = await page.locator('#algorithm option').evaluateAll((os) => os.map((o) => (o as unknown as { value: string }).value));
    expect(names).toEqual(['fixed-window', 'sliding-log', 'sliding-window', 'token-bucket', 'leaky-bucket', 'sliding-buckets']);
    expect(await page.isVisible('#mode')).toBe(false);
    await page.selectOption('#algorithm', 'leaky-bucket');
    expect(await page.locator('#mode option').evaluateAll((os) => os.map((o) => (o as unknown as { value: string }).value))).toEqual([
      'meter',
      'queue',
    ]);
    expect(await page.isVisible('#burst')).toBe(true);
    await page.selectOption('#mode', 'queue');
    expect(await page.isVisible('#queue')).toBe(true);
    expect(await page.isVisible('#burst')).toBe(false);
    expect(await page.isVisible('#buckets')).toBe(false);
    await page.selectOption('#algorithm', 'sliding-buckets');
    expect(await page.isVisible('#buckets')).toBe(true);
    expect(await page.isVisible('#queue')).toBe(false);
    await page.close();
  });

  it('a leaky-bucket queue run: the server admits and delays what the simulator predicts', async () => {
    // 20 at once, 10/s, 10 places: the browser alone would have held all but six of them.
    const page = await open();
    // The run's clock stands still, so the burst arrives at one instant as its pattern says (on a
    // busy machine the real arrivals spread over more than the queue's 100 ms and it drained between them).
    held = performance.now();
    try {
      expect(await fire(page, { algorithm: 'leaky-bucket', mode: 'queue', rate: '10/s', pattern: 'burst 20 at 0' })).toBe('done');
    } finally {
      held = undefined;
    }
    const [server, prediction] = await rows(page);
    expect(prediction?.slice(0, 4)).toEqual([20, 10, 10, 10]);
    expect(server?.slice(0, 4)).toEqual(prediction?.slice(0, 4));
    expect(await count(page, 'observed', 'delayed')).toBe(10);
    expect(await count(page, 'observed', 'rejected')).toBe(10);
    expect(await page.textContent('#rule')).toContain(
      "{ name: 'leaky-bucket-queue', algorithm: 'leaky-bucket', mode: 'queue', rate: '10/s' }",
    );
    expect(await page.textContent('#agreement')).toContain('20 of 20 decisions agree');
    await page.close();
  });

  it('sliding-log never shows more than its limit in any window', async () => {
    const page = await open();
    // 100 a second for 2 s against 10 per second: the limiter is asked again the moment each entry expires.
    expect(await fire(page, { algorithm: 'sliding-log', rate: '10/s', pattern: 'rate 100/s for 2s' })).toBe('done');
    const [server, prediction] = await rows(page);
    expect(server?.[4]).toBe(10);
    expect(prediction?.[4]).toBe(10);
    for (const chart of ['observed', 'prediction']) {
      const band = await page.locator(`#${chart} svg text.bl`).textContent();
      expect(band).toBe('max 10 in 1 s');
    }
    // The live view drew this run's refusals for the policy, from the metrics.
    const line = page.locator('#live svg path[data-policy="sliding-log"]');
    expect(await line.getAttribute('data-total')).toBe(String(server?.[3]));
    await page.close();
  });

  it('fires a burst and charts admitted and rejected requests next to the prediction', async () => {
    const page = await open();
    // 5 per 10 s on a sliding log: exactly 5 of 12 pass.
    expect(await fire(page, { algorithm: 'sliding-log', rate: '5/10s', pattern: 'burst 12 at 0' })).toBe('done');
    expect(await count(page, 'observed', 'admitted')).toBe(5);
    expect(await count(page, 'observed', 'rejected')).toBe(7);
    expect(await count(page, 'prediction', 'admitted')).toBe(5);
    expect(await count(page, 'prediction', 'rejected')).toBe(7);
    expect(await page.textContent('#status')).toMatch(/^done: 12 of 12 requests reached the server\./);
    expect(await page.textContent('#agreement')).toContain('12 of 12 decisions agree');
    const [server] = await rows(page);
    expect(server?.slice(0, 4)).toEqual([12, 5, 0, 7]);
    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL('playground.png', ARTIFACTS).pathname, fullPage: true });
    await page.close();
  });

  it('a failed run shows no stale chart: a bad pattern, then a run whose connection drops', async () => {
    const page = await open();
    expect(await fire(page, { algorithm: 'token-bucket', rate: '5/s', pattern: 'burst 8 at 0' })).toBe('done');
    expect(await count(page, 'observed', 'admitted')).toBe(5);

    await page.fill('#pattern', 'wave 3');
    await page.click('#fire');
    await page.waitForSelector('#results[data-state="failed"]');
    const message = (await page.textContent('#status')) as string;
    expect(message).toMatch(/^Arrival pattern: "wave 3" is not a pattern the playground knows\./);
    expect(message).not.toMatch(/--|TG_/);
    expect(await page.getAttribute('#pattern', 'aria-invalid')).toBe('true');
    expect(await page.locator('#observed [data-decision], #prediction [data-decision]').count()).toBe(0);
    expect(await page.isVisible('#summary')).toBe(false);
    expect(await page.textContent('#agreement')).toBe('');

    // A good run again, then one whose fire request fails mid-way.
    await page.fill('#pattern', 'burst 8 at 0');
    await page.click('#fire');
    await page.waitForSelector('#results[data-state="done"]');
    await page.route('**/fire', (route) => route.abort('connectionreset'));
    await page.click('#fire');
    await page.waitForSelector('#results[data-state="failed"]');
    expect(await page.textContent('#status')).toMatch(/^The run failed: the server could not be reached or dropped the connection\./);
    expect(await page.locator('#observed [data-decision], #prediction [data-decision]').count()).toBe(0);
    expect(await page.isVisible('#summary')).toBe(false);
    expect(await page.getAttribute('#pattern', 'aria-invalid')).toBeNull();
    await page.close();
  });
});
