// What @tollgate/otel adds to each decision when no meter provider is installed (the
// OpenTelemetry API's no-op instruments): the engine's duration clock reads, the message
// and the channel publish, and the recorder itself. Runs the same path the adapters run
// per request (limiter.consumeSync, then publishDecision) with and without the recorder,
// in alternating rounds, and prints the median CPU time per decision of each and their
// difference. Uses the built packages: `pnpm build && node packages/otel/bench/overhead.mjs`.
import { createLimiter, MemoryStore, publishDecision } from '@tollgate/core';
import { tollgateMetrics } from '@tollgate/otel';

const N = Number(process.env.N ?? 300_000);
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const rules = [
  { name: 'ip', key: (req) => req.ip, limit: 1_000_000_000, window: '1m' },
  { name: 'tenant', key: (req) => req.tenant, algorithm: 'token-bucket', rate: '1000000000/min' },
];
const limiter = createLimiter({ rules, store: new MemoryStore() });
const reqs = Array.from({ length: 64 }, (_, i) => ({ ip: `10.0.0.${i}`, tenant: `t${i % 8}` }));

function run(n) {
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const req = reqs[i & 63];
    publishDecision(limiter.consumeSync(req), req, 'api');
  }
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / n; // ns per decision
}

// MODE=bare or MODE=otel: only that path, N decisions after as many for warm-up, and exit;
// for callgrind, whose instruction counts the machine's load does not move. Two runs per
// mode with different N give instructions per decision as (I(N2) - I(N1)) / (N2 - N1):
//   for m in bare otel; do for n in 20000 60000; do MODE=$m N=$n valgrind --tool=callgrind \
//     --callgrind-out-file=/tmp/cg.$m.$n node --single-threaded packages/otel/bench/overhead.mjs; done; done
if (process.env.MODE !== undefined) {
  const rec = process.env.MODE === 'otel' ? tollgateMetrics() : undefined;
  run(N);
  run(N);
  rec?.stop();
  process.exit(0);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
run(N); // warm up both paths
const recorder = tollgateMetrics();
run(N);
recorder.stop();

const bare = [];
const recorded = [];
for (let r = 0; r < ROUNDS; r++) {
  bare.push(run(N));
  const rec = tollgateMetrics();
  recorded.push(run(N));
  rec.stop();
}
const b = median(bare);
const w = median(recorded);
console.log(`decisions per round: ${N}, rounds: ${ROUNDS}`);
console.log(`without @tollgate/otel: ${b.toFixed(0)} ns CPU per decision (median)`);
console.log(`with tollgateMetrics(), no meter provider: ${w.toFixed(0)} ns CPU per decision (median)`);
console.log(`added: ${(w - b).toFixed(0)} ns per decision`);
