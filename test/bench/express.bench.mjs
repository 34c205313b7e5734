// Express hello-world with one rateLimit rule against the same app without it, beside
// express-rate-limit, in the same run: the Express rows of the shared HTTP harness
// (test/bench/http.mjs, which `pnpm bench` runs in full).
//
//   pnpm build && node test/bench/express.bench.mjs [--duration 4] [--runs 3] [--connections 50]
//
// TOLLGATE_EXPRESS=/path/to/dist/index.mjs measures a private build (a shared checkout's
// dist may be rebuilt by someone else in the middle of a run).
import { parseArgs } from 'node:util';
import { httpTable, runHttp } from './http.mjs';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '4' },
    runs: { type: 'string', default: '3' },
    connections: { type: 'string', default: '50' },
  },
});
const rows = await runHttp({
  duration: Number(values.duration),
  runs: Number(values.runs),
  connections: Number(values.connections),
  only: ['express tollgate memory 1 rule', 'express express-rate-limit memory'],
});
console.log(httpTable(rows));
