// A language-model proxy in miniature: GET /v1/stream?prompt=...&length=N answers with
// server-sent events, one per "generated" token (the model's answer length is what the
// client cannot know in advance; here it asks for one, to show what happens).
//
// Tokens are limited per API key (1200 a minute, bursts of 100) and per tenant (3000 a
// minute, bursts of 300), both token buckets. A request reserves an estimate from its
// prompt (its words plus 10 for the answer) and is settled from the stream when the
// response ends: the prompt's words plus the tokens actually sent. An answer longer than
// the estimate leaves the key in debt; its next request waits until time has paid it off.
//
//   PORT   where to listen (default 3000)
//   --demo listen on a free loopback port, run three requests and a polite retry, and exit

import { createFetch } from '@tollgate/client';
import { rateLimit } from '@tollgate/express';
import express from 'express';

const TENANTS = { 'alice-key': 'acme', 'bob-key': 'acme', 'carol-key': 'globex' };

const words = (prompt) =>
  String(prompt ?? '')
    .split(/\s+/)
    .filter(Boolean).length;
const apiKey = (req) => req.get('x-api-key');
const estimate = (req) => words(req.query.prompt) + 10;
// What the response really used: the prompt, and the tokens the stream sent (counted on
// Node's response as they go out; an aborted stream never finishes and keeps the estimate).
const used = (req, res) => words(req.query.prompt) + (res.tokensSent ?? 0);

const tokens = { algorithm: 'token-bucket', cost: estimate, actualCost: used };
export const limiter = rateLimit({
  rules: [
    { name: 'key', key: apiKey, limit: 1200, window: '1m', burst: 100, ...tokens },
    { name: 'tenant', key: (req) => TENANTS[apiKey(req)], limit: 3000, window: '1m', burst: 300, ...tokens },
  ],
});

const app = express();
app.get('/v1/stream', limiter, async (req, res) => {
  const length = Math.min(Number(req.query.length) || 20, 1000);
  res.setHeader('Content-Type', 'text/event-stream');
  res.setHeader('Cache-Control', 'no-store');
  res.tokensSent = 0;
  for (let i = 0; i < length && !res.destroyed; i++) {
    res.write(`data: ${JSON.stringify({ token: `t${i}` })}\n\n`);
    res.tokensSent++;
    await new Promise((resolve) => setImmediate(resolve));
  }
  res.end('data: [DONE]\n\n');
});

const demo = process.argv.includes('--demo');
const server = app.listen(demo ? 0 : Number(process.env.PORT ?? 3000), demo ? '127.0.0.1' : undefined);
await new Promise((resolve) => server.once('listening', resolve));
const base = `http://127.0.0.1:${server.address().port}`;
if (!demo) console.log(`llm-proxy on ${base}/v1/stream (x-api-key: alice-key, bob-key or carol-key)`);
else {
  await runDemo();
  server.close();
}

async function runDemo() {
  const headers = { 'x-api-key': 'alice-key' };
  const prompt = encodeURIComponent('tell me a short story');
  const show = async (label, res) => {
    const body = await res.text();
    const events = body.split('\n\n').filter((e) => e.startsWith('data: {')).length;
    const key = await limiter.get('key', 'alice-key');
    const retry = res.headers.get('retry-after');
    console.log(
      `${label.padEnd(30)} ${res.status}  ${res.status === 200 ? `streamed ${events} tokens` : `Retry-After: ${retry}`}` +
        `  key: remaining ${key.remaining}${key.retryAfterMs > 0 ? ', in debt' : ''}`,
    );
  };
  // Settling happens when the response finishes, just after the client has read it.
  const settled = () => new Promise((resolve) => setTimeout(resolve, 20));
  for (const [label, length] of [
    ['estimate 15, answer 30', 30],
    ['estimate 15, answer 150', 150],
  ]) {
    const res = await fetch(`${base}/v1/stream?prompt=${prompt}&length=${length}`, { headers });
    await settled();
    await show(label, res);
  }
  await show('estimate 15, refused', await fetch(`${base}/v1/stream?prompt=${prompt}&length=10`, { headers }));
  // The polite client waits out the debt (Retry-After) and tries again.
  const started = Date.now();
  const polite = createFetch({ maxWaitMs: 30_000 });
  const res = await polite(`${base}/v1/stream?prompt=${prompt}&length=10`, { headers });
  await settled();
  await show(`polite client, after ${Math.round((Date.now() - started) / 1000)} s`, res);
}
