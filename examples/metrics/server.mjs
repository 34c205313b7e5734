// Starts the metrics example: `node examples/metrics/server.mjs` (after `pnpm build`).
// PORT sets the port (default 4200); it listens on 127.0.0.1 only.
import { startMetricsApp } from './app.mjs';

const port = process.env.PORT === undefined ? 4200 : Number(process.env.PORT);
const { url, close } = await startMetricsApp({ port });
console.log(`tollgate metrics example: the API at ${url}api/items, Prometheus metrics at ${url}metrics`);
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => close().then(() => process.exit(0)));
