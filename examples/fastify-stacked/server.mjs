// Stacked limits, decided as one all-or-nothing step per request:
//   ip      300 per minute per client address (everyone, signed in or not)
//   user     30 per minute per signed-in user
//   tenant  100 per minute per tenant (all of its users together)
//   global 1000 per minute for the whole app
// plus, per route (config.rateLimit.rules, added to the stack above),
//   POST /login   5 failed attempts per 15 minutes per address, then blocked for an hour
//   GET  /export  100 units per hour per tenant; a CSV costs 2, a PDF 10
// and a second registration inside the /admin scope (it stacks on the first):
//   admin    10 per minute per user, for /admin/* only
//
// Sign in with `Authorization: Bearer <token>` using one of the demo tokens below.
// Run: pnpm --filter @tollgate-examples/fastify-stacked start (see README.md).
import tollgate, { constant, tenant, user } from '@tollgate/fastify';
import Fastify from 'fastify';

const TOKENS = {
  'alice-token': { id: 'alice', tenant: 'acme' },
  'bob-token': { id: 'bob', tenant: 'acme' },
  'carol-token': { id: 'carol', tenant: 'globex' },
};

const app = Fastify({ logger: false });

// A stand-in for real authentication: it only reads a bearer token. As an onRequest
// hook added before tollgate's route hooks, it runs first, so user and tenant keys work
// while tollgate still refuses before the body is read.
app.decorateRequest('user', undefined);
app.addHook('onRequest', (request, _reply, done) => {
  const token = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
  request.user = token ? TOKENS[token] : undefined;
  done();
});

await app.register(tollgate, {
  rules: [
    { name: 'ip', rate: '300/min' },
    { name: 'user', key: user((req) => req.user?.id), rate: '30/min' },
    { name: 'tenant', key: tenant((req) => req.user?.tenant), rate: '100/min' },
    { name: 'global', key: constant('all'), rate: '1000/min' },
  ],
  trustProxy: process.env.TRUST_PROXY ?? false,
});

app.post(
  '/login',
  {
    config: {
      rateLimit: {
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
      },
    },
  },
  async (request, reply) => {
    const entry = Object.entries(TOKENS).find(([, u]) => u.id === request.body?.user && request.body?.password === 'demo');
    if (!entry) return reply.code(401).send({ error: 'wrong user or password' });
    return { token: entry[0] };
  },
);

app.get(
  '/export',
  {
    config: {
      rateLimit: {
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
      },
    },
  },
  async (request, reply) => {
    if (!request.user) return reply.code(401).send({ error: 'sign in first' });
    return { export: request.query.format === 'pdf' ? 'report.pdf' : 'report.csv', tenant: request.user.tenant };
  },
);

// A second registration in a scope: /admin/* meets both stacks, and the RateLimit headers
// list the items of both (appended, never overwritten).
await app.register(
  async (admin) => {
    await admin.register(tollgate, {
      rules: [{ name: 'admin', key: user((req) => req.user?.id), rate: '10/min' }],
      name: 'admin',
    });
    admin.get('/stats', async (request) => ({ user: request.user?.id ?? null, rules: request.rateLimit?.rules.map((r) => r.name) }));
  },
  { prefix: '/admin' },
);

app.get('/healthz', { config: { rateLimit: false } }, async () => 'ok');

app.get('/', async (request) => ({
  user: request.user?.id ?? null,
  limits: request.rateLimit?.rules.map((r) => ({ name: r.name, remaining: r.remaining, limit: r.limit })),
}));

const port = Number(process.env.PORT ?? 3000);
const address = await app.listen({ port, host: process.env.HOST ?? '127.0.0.1' });
console.log(`fastify-stacked listening on ${address}/`);
