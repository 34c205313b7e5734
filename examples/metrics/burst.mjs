// Starts the example on a free port, sends the scripted burst (8 requests for tenant
// acme, 3 for globex), prints the statuses and then the tollgate lines of /metrics.
// `node examples/metrics/burst.mjs` (after `pnpm build`).
import { burst, startMetricsApp } from './app.mjs';

const { url, close } = await startMetricsApp({ port: 0 });
try {
  console.log(JSON.stringify(await burst(url)));
  const text = await (await fetch(new URL('metrics', url))).text();
  console.log(
    text
      .split('\n')
      .filter((line) => line.includes('tollgate_'))
      .join('\n'),
  );
} finally {
  await close();
}
