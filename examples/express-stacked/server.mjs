// Stacked limits, decided as one all-or-nothing step per request:
//   ip      300 per minute per client address (everyone, signed in or not)
//   user     30 per minute per signed-in user
//   tenant  100 per minute per tenant (all of its users together)
//   global 1000 per minute for the whole app
// plus, per route,
//   POST /login   5 failed attempts per 15 minutes per address, then blocked for an hour
//   GET  /export  100 units per hour per tenant; a CSV costs 2, a PDF 10
//
// Sign in with `Authorization: Bearer <token>` using one of the demo tokens below.
// Run: pnpm --filter @tollgate-examples/express-stacked start (see README.md).
import { constant, rateLimit, tenant, user } from '@tollgate/express';
import express from 'express';

const TOKENS = {
  'alice-token': { id: 'alice', tenant: 'acme' },
  'bob-token': { id: 'bob', tenant: 'acme' },
  'carol-token': { id: 'carol', tenant: 'globex' },
};

const app = express();
app.use(express.json());

// A stand-in for real authentication: it only reads a bearer token.
app.use((req, _res, next) => {
  const token = /^Bearer (.+)$/.exec(req.get('authorization') ?? '')?.[1];
  req.user = token ? TOKENS[token] : undefined;
  next();
});

const limiter = rateLimit({
  rules: [
    { name: 'ip', rate: '300/min' },
    { name: 'user', key: user((req) => req.user?.id), rate: '30/min' },
    { name: 'tenant', key: tenant((req) => req.user?.tenant), rate: '100/min' },
    { name: 'global', key: constant('all'), rate: '1000/min' },
  ],
  trustProxy: process.env.TRUST_PROXY ?? false,
});
app.use(limiter);

app.post(
  '/login',
  limiter.route({
    rules: [
      {
        name: 'login',
        limit: 5,
        window: '15m',
        algorithm: 'fixed-window',
        blockFor: '1h',
        // Only failed attempts count: a successful login is given back after the response.
        skipSuccessful: true,
      },
    ],
  }),
  (req, res) => {
    const entry = Object.entries(TOKENS).find(([, u]) => u.id === req.body?.user && req.body?.password === 'demo');
    if (!entry) return res.status(401).json({ error: 'wrong user or password' });
    res.json({ token: entry[0] });
  },
);

app.get(
  '/export',
  limiter.route({
    rules: [
      {
        name: 'export',
        key: tenant((req) => req.user?.tenant),
        limit: 100,
        window: '1h',
        algorithm: 'token-bucket',
        cost: (req) => (req.query.format === 'pdf' ? 10 : 2),
      },
    ],
  }),
  (req, res) => {
    if (!req.user) return res.status(401).json({ error: 'sign in first' });
    res.json({ export: req.query.format === 'pdf' ? 'report.pdf' : 'report.csv', tenant: req.user.tenant });
  },
);

app.get('/', (req, res) => {
  res.json({
    user: req.user?.id ?? null,
    limits: req.rateLimit?.rules.map((r) => ({ name: r.name, remaining: r.remaining, limit: r.limit })),
  });
});

const port = Number(process.env.PORT ?? 3000);
const server = app.listen(port, () => {
  console.log(`express-stacked listening on http://localhost:${server.address().port}/`);
});
