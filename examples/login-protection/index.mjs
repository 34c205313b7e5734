// Login protection (docs/quotas.md): failed logins are counted per account and per client
// address; 5 failures in 15 minutes block the account for an hour. Successful logins do not
// count (skipSuccessful: a refund after the response), and a slow-down throttle makes
// password guessing expensive long before the block.
// Run: node index.mjs          (serves on PORT, default 3000)
//      node index.mjs --demo   (starts, tries 7 wrong passwords then the right one, exits)

import { rateLimit, slowDown } from '@tollgate/express';
import express from 'express';

const USERS = new Map([['alice', 'correct horse battery staple']]);

const app = express();
app.use(express.json());

const loginLimit = rateLimit({
  rules: [
    {
      name: 'login-account',
      key: (req) => (typeof req.body?.user === 'string' ? req.body.user.toLowerCase() : undefined),
      limit: 5,
      window: '15m',
      algorithm: 'fixed-window',
      // The 15 minutes start at the account's first failure, not at a clock-aligned quarter hour.
      align: 'first-request',
      blockFor: '1h',
      skipSuccessful: true,
    },
    // One address guessing many accounts: a wider budget, also failures only.
    { name: 'login-ip', limit: 20, window: '15m', skipSuccessful: true },
  ],
});

app.post(
  '/login',
  // The limit goes first: a blocked account is refused at once instead of waiting out a
  // delay only to be refused afterwards (docs/slow-down.md, "Throttle and limiter").
  loginLimit,
  slowDown({ window: '15m', delayAfter: 3, delay: (hits) => Math.min(2 ** (hits - 3) * 250, 4000) }),
  (req, res) => {
    const { user, password } = req.body ?? {};
    if (typeof user === 'string' && USERS.get(user.toLowerCase()) === password) {
      res.json({ ok: true });
      return;
    }
    res.status(401).json({ ok: false });
  },
);

const demo = process.argv.includes('--demo');
const server = app.listen(Number(process.env.PORT ?? (demo ? 0 : 3000)), '127.0.0.1', async () => {
  const { port } = server.address();
  if (!demo) {
    console.log(`listening on http://127.0.0.1:${port} — POST /login { "user", "password" }`);
    return;
  }
  const attempt = async (password) => {
    const started = Date.now();
    const res = await fetch(`http://127.0.0.1:${port}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'alice', password }),
    });
    const retry = res.headers.get('retry-after');
    console.log(
      `${password.padEnd(30)} ${res.status}  waited ${String(Date.now() - started).padStart(4)} ms${retry ? `  Retry-After: ${retry}` : ''}`,
    );
  };
  for (let i = 1; i <= 7; i++) await attempt(`guess-${i}`);
  await attempt('correct horse battery staple'); // blocked: the account is locked for an hour
  server.close();
});
