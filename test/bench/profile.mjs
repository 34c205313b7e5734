// Where a server's CPU time goes per request (docs/benchmarks.md, "Where the time goes"):
// runs one HTTP variant under `node --cpu-prof`, drives it with autocannon like the HTTP
// benchmark, and splits the profile's samples into framework, Node's HTTP, key extraction,
// the engine, the store, headers, the adapter, body, GC and the rest, in µs per request
// (share of samples × the server's CPU µs per request).
//
//   pnpm build && node test/bench/profile.mjs "fastify tollgate memory 1 rule" [--duration 5] [--keep /tmp/prof]
//
// Names of variants: test/bench/http/variants.mjs. Redis variants get a private redis-server.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ask, start } from './http.mjs';
import { isMain, startRedis } from './util.mjs';

const regions = new Map();

/**
 * A frame's place in the sources: each package's build is one bundle whose `//#region
 * src/<module>.ts` comments say which source module every line came from, so a frame in
 * `packages/<name>/dist/index.mjs` at line L is charged to `packages/<name>/src/<module>`.
 * Other URLs are returned as they are.
 */
export function sourceOf(url, line) {
  const m = /^(.*packages\/[^/]+\/)dist\/index\.m?js$/.exec(url);
  if (!m || line === undefined) return url;
  let table = regions.get(url);
  if (!table) {
    table = [];
    try {
      const lines = readFileSync(url.startsWith('file:') ? fileURLToPath(url) : url, 'utf8').split('\n');
      lines.forEach((text, i) => {
        const r = /^\/\/#region (\S+)/.exec(text);
        if (r) table.push([i, r[1]]);
      });
    } catch {
      // unreadable: charge the frame to the bundle as a whole
    }
    regions.set(url, table);
  }
  let module;
  for (const [from, name] of table) {
    if (from > line) break;
    module = name;
  }
  return module ? `${m[1]}${module}` : url;
}

/** The bucket a profile frame's time is charged to, by where its code lives. */
export function bucket(rawUrl, fn, line) {
  const url = sourceOf(rawUrl, line);
  if (fn === '(garbage collector)') return 'GC';
  if (fn === '(idle)') return 'idle';
  if (fn === '(program)') return 'V8/native (unattributed)';
  if (/packages\/core\/src\/(keys|ip)/.test(url)) return 'tollgate: key extraction';
  if (/packages\/core\/src\/headers/.test(url)) return 'tollgate: headers';
  if (/packages\/core\/src\/(memory-store|memory-table|stack|algorithms)/.test(url)) return 'tollgate: store + algorithm';
  if (/packages\/core\/src\/limiter/.test(url)) return 'tollgate: engine (limiter)';
  if (/packages\/redis\/(dist|src)/.test(url)) return 'tollgate: Redis store';
  if (/packages\/core\/(dist|src)/.test(url)) return 'tollgate: core, other (merge, diagnostics, response)';
  if (/packages\/(express|fastify)\/(dist|src)/.test(url)) return 'tollgate: adapter';
  if (/node_modules\/.*ioredis|node_modules\/.*redis-parser|node_modules\/.*denque/.test(url)) return 'ioredis';
  if (
    /node_modules\/.*(express|fastify|find-my-way|light-my-request|avvio|router|finalhandler|send|on-finished|body-parser|qs|content-type|mime|accepts|negotiator|type-is|fast-json-stringify|@fastify|safe-regex2|proxy-addr|forwarded|etag|fresh|statuses|depd|debug|parseurl|encodeurl|escape-html|vary|setprototypeof|inherits|cookie|range-parser|toad-cache|rfdc|process-warning|abstract-logging|pino|fast-decode-uri|fast-querystring|ret|json-schema|ajv)/.test(
      url,
    )
  )
    return 'framework';
  if (/node_modules/.test(url)) return 'other dependencies';
  if (
    /^node:(_http|http|net|internal\/(http|streams|stream_base|net|timers|url|util|events)|events|stream|buffer|string_decoder)|_http_/.test(
      url,
    )
  )
    return 'Node: HTTP, net, streams';
  if (
    url === '' &&
    /^(write|writev|writeUtf8String|writeBuffer|onStreamRead|readStart|close|shutdown|getsockname|setNoDelay|clearTimeout|setTimeout|hrtime|now|cpuUsage)/.test(
      fn,
    )
  )
    return 'Node: HTTP, net, streams';
  if (url.startsWith('node:')) return 'Node: other';
  if (url === '') return 'V8/native (unattributed)';
  return 'other';
}

/** Self time per bucket (share of non-idle samples taken between `from` and `to`, µs) in a .cpuprofile. */
export function split(profile, from = 0, to = Number.POSITIVE_INFINITY) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let t = profile.startTime;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    t += dt;
    if (t >= from && t <= to) self.set(id, (self.get(id) ?? 0) + dt);
  });
  const totals = {};
  for (const [id, t] of self) {
    const cf = byId.get(id).callFrame;
    const b = bucket(cf.url, cf.functionName, cf.lineNumber);
    totals[b] = (totals[b] ?? 0) + t;
  }
  delete totals.idle;
  const all = Object.values(totals).reduce((a, b) => a + b, 0);
  return Object.fromEntries(Object.entries(totals).map(([k, v]) => [k, v / all]));
}

/** Profiles one variant; returns { cpuUs, rps, shares }. */
export async function profileVariant(name, { duration = 5, connections = 50, keep } = {}) {
  const autocannon = (await import('autocannon')).default;
  const dir = keep === undefined ? mkdtempSync(join(tmpdir(), 'tollgate-prof-')) : join(keep, name.replaceAll(/[^\w@-]+/g, '-'));
  mkdirSync(dir, { recursive: true });
  const redis = name.includes('redis') ? await startRedis() : undefined;
  const load = (port, seconds) =>
    new Promise((resolve, reject) => {
      autocannon({ url: `http://127.0.0.1:${port}/`, connections, duration: seconds }, (err, r) => (err ? reject(err) : resolve(r)));
    });
  try {
    const { child, port } = await start(name, redis?.port, ['--cpu-prof', '--cpu-prof-interval', '100', '--cpu-prof-dir', dir]);
    await load(port, 1);
    const cpu0 = await ask(child);
    const from = child.lastT;
    const r = await load(port, duration);
    const cpu1 = await ask(child);
    const to = child.lastT;
    child.removeAllListeners('exit');
    child.send('stop');
    await new Promise((res) => child.once('exit', res));
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
    // Only the measured seconds: not start-up (module loading) nor the warm-up.
    const prof = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    const shares = split(prof, from, to);
    return { cpuUs: (cpu1 - cpu0) / r.requests.total, rps: r.requests.total / duration, shares, dir };
  } finally {
    await redis?.stop();
    if (keep === undefined) rmSync(dir, { recursive: true, force: true });
  }
}

export function profileTable(results) {
  const names = Object.keys(results);
  const buckets = [...new Set(names.flatMap((n) => Object.keys(results[n].shares)))].sort(
    (a, b) => Math.max(...names.map((n) => results[n].shares[b] ?? 0)) - Math.max(...names.map((n) => results[n].shares[a] ?? 0)),
  );
  const out = [`| µs of server CPU per request | ${names.join(' | ')} |`, `| --- | ${names.map(() => '---:').join(' | ')} |`];
  for (const b of buckets)
    out.push(`| ${b} | ${names.map((n) => ((results[n].shares[b] ?? 0) * results[n].cpuUs).toFixed(2)).join(' | ')} |`);
  out.push(`| **total** | ${names.map((n) => `**${results[n].cpuUs.toFixed(1)}**`).join(' | ')} |`);
  return out.join('\n');
}

if (isMain(import.meta.url)) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { duration: { type: 'string', default: '5' }, keep: { type: 'string' } },
  });
  const results = {};
  for (const name of positionals) {
    results[name] = await profileVariant(name, { duration: Number(values.duration), keep: values.keep });
    process.stderr.write(`${name}: ${results[name].cpuUs.toFixed(1)} µs/req, ${Math.round(results[name].rps)} req/s\n`);
  }
  console.log(profileTable(results));
}
