// limitRate's memory per paced response: N responses held open at once, each an endless
// stream (fresh 16 KiB buffers) piped through the pacer to a client that reads (slowly:
// 1 KB/s per key, every client its own key), against the same N responses held open
// unpaced with a stream that has produced nothing yet. Heap plus ArrayBuffer memory after
// a full GC, so that the chunks held count; built packages.
//
//   node --expose-gc test/bench/limit-rate-memory.mjs [N]
import http from 'node:http';
import { pipeline, Readable } from 'node:stream';
import { limitRate } from '@tollgate/node';

const N = Number(process.argv[2] ?? 500);
function stream(endless) {
  return new Readable({
    highWaterMark: 16 * 1024,
    read() {
      if (endless) this.push(Buffer.alloc(16 * 1024, 0x61));
    },
  });
}

async function heapAfterGc() {
  for (let i = 0; i < 3; i++) {
    globalThis.gc();
    await new Promise((r) => setTimeout(r, 50));
  }
  const m = process.memoryUsage();
  return { heap: m.heapUsed, buffers: m.arrayBuffers };
}

async function measure(paced) {
  const pace = limitRate({ rate: '1KB/s', burst: '1KB', key: (req) => req.headers['x-k'] });
  let started = 0;
  const server = http.createServer(async (req, res) => {
    if (paced && !(await pace(req, res))) return;
    started++;
    res.flushHeaders();
    pipeline(stream(paced), res, () => {});
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const port = server.address().port;
  const before = await heapAfterGc();
  const reqs = [];
  let bytes = 0;
  for (let i = 0; i < N; i++) {
    const req = http.get({ host: '127.0.0.1', port, path: '/', headers: { 'x-k': `k${i}` }, agent: false }, (res) =>
      res.on('data', (c) => {
        bytes += c.length;
      }),
    );
    req.on('error', () => {});
    reqs.push(req);
  }
  while (started < N) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 500));
  const after = await heapAfterGc();
  const active = pace.limit.active;
  for (const r of reqs) r.destroy();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await pace.close();
  return { heap: (after.heap - before.heap) / N, buffers: (after.buffers - before.buffers) / N, bytes, active };
}

const unpaced = await measure(false);
const paced = await measure(true);
console.log(`N = ${N} responses held open`);
const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;
console.log(`unpaced: heap ${kib(unpaced.heap)}, buffers ${kib(unpaced.buffers)} per response (server and client side together)`);
console.log(
  `paced:   heap ${kib(paced.heap)}, buffers ${kib(paced.buffers)} per response (${paced.active.responses} paced, ${paced.active.keys} keys)`,
);
console.log(`pacing:  heap ${kib(paced.heap - unpaced.heap)}, buffers ${kib(paced.buffers - unpaced.buffers)} per paced response`);
