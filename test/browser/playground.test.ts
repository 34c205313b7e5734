/**
 * The playground (examples/playground) in a real browser: Debian's headless Chromium
 * driven by playwright-core (never a downloaded browser; `.ci/run` installs `chromium`).
 * Loads the page, fires a burst at the server, and checks that the chart of what
 * happened shows the admitted and the rejected requests, next to the prediction.
 */
import { mkdir } from 'node:fs/promises';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlayground } from '../../examples/playground/app.mjs';

const ARTIFACTS = new URL('../artifacts/', import.meta.url);

describe('playground in headless Chromium', () => {
  let playground: Awaited<ReturnType<typeof startPlayground>>;
  let browser: Browser;

  beforeAll(async () => {
    playground = await startPlayground({ port: 0 });
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

  it('fires a burst and charts admitted and rejected requests next to the prediction', async () => {
    const page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
    await page.goto(playground.url);
    expect(await page.title()).toBe('tollgate playground');
    // 5 per 10 s on a sliding log: however the browser spreads the burst, exactly 5 of 12 pass.
    await page.selectOption('#algorithm', 'sliding-log');
    await page.fill('#rate', '5/10s');
    await page.fill('#pattern', 'burst 12 at 0');
    await page.click('#fire');
    await page.waitForSelector('#results[data-state="done"]', { timeout: 15_000 });

    const count = (chart: string, decision: string) => page.locator(`#${chart} [data-decision="${decision}"]`).count();
    expect(await count('observed', 'admitted')).toBe(5);
    expect(await count('observed', 'rejected')).toBe(7);
    expect(await count('prediction', 'admitted')).toBe(5);
    expect(await count('prediction', 'rejected')).toBe(7);
    expect(await page.textContent('#status')).toMatch(/^done: 12 of 12 requests reached the server\./);
    expect(await page.textContent('#agreement')).toContain('12 of 12 decisions agree');
    const server = await page.locator('#summary tbody tr').first().locator('td').allTextContents();
    expect(server.slice(0, 4)).toEqual(['12', '5', '0', '7']);

    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL('playground.png', ARTIFACTS).pathname, fullPage: true });
    await page.close();
  });

  it('shows a bad pattern as an error instead of firing', async () => {
    const page = await browser.newPage();
    await page.goto(playground.url);
    await page.fill('#pattern', 'wave 3');
    await page.click('#fire');
    await page.waitForSelector('#status.error');
    expect(await page.textContent('#status')).toMatch(/^TG_CLI_INVALID_PATTERN: /);
    expect(await page.locator('#observed [data-decision]').count()).toBe(0);
    await page.close();
  });
});
