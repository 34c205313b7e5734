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
