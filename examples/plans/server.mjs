// Plans and tiers on an Express API (see README.md and docs/plans.md).
//
//   free        5 requests per minute per tenant; past that, shut out for 5 minutes
//   pro        50 requests per minute per tenant
//   enterprise  the tenant's negotiated limit, read from the database on every request
//   ip       1000 requests per minute per client address, for everyone
//
// A tenant signs in with `X-Api-Key`. Its plan is looked up asynchronously, as it would
// be in a real database. The admin API (`X-Admin-Token`) changes a plan, a negotiated
// limit or a tier's limit without a restart, and reads, unblocks or resets a tenant.
//
// The memory store by default; set REDIS_URL to share the limits between instances
// (tier changes are then sent to every instance over Redis pub/sub).
import { ipKey, MemoryStore, rateLimit, tenant } from '@tollgate/express';
import express from 'express';

const ADMIN_TOKEN = process.env.ADMIN_TOKEN ?? 'admin-secret';
const PLANS = ['free', 'pro', 'enterprise'];

// ---- A stand-in for the application's database: every read is awaited. ----
const tenants = new Map([
  ['acme', { id: 'acme', plan: 'free', apiKey: 'acme-key' }],
  ['globex', { id: 'globex', plan: 'pro', apiKey: 'globex-key' }],
  ['initech', { id: 'initech', plan: 'enterprise', apiKey: 'initech-key', quota: 200 }],
]);
const db = {
  async tenantByApiKey(apiKey) {
    await new Promise((resolve) => setImmediate(resolve));
    for (const t of tenants.values()) if (t.apiKey === apiKey) return { ...t };
    return undefined;
  },
  async quotaOf(id) {
    await new Promise((resolve) => setImmediate(resolve));
    return tenants.get(id)?.quota ?? 200; // the enterprise default, until a limit is negotiated
  },
  async setPlan(id, plan) {
    const t = tenants.get(id);
    if (t) t.plan = plan;
    return t !== undefined;
  },
  async setQuota(id, quota) {
    const t = tenants.get(id);
    if (t) t.quota = quota;
    return t !== undefined;
  },
};

// ---- The store: memory, or Redis when REDIS_URL is set. ----
let store = new MemoryStore();
let publishUpdate = async () => {};
let closeRedis = () => {};
if (process.env.REDIS_URL) {
  const [{ Redis }, { RedisStore }] = await Promise.all([import('ioredis'), import('@tollgate/redis')]);
  const client = new Redis(process.env.REDIS_URL);
  const sub = new Redis(process.env.REDIS_URL); // a subscribed connection runs nothing else
  const channel = `${process.env.REDIS_PREFIX ?? 'plans:'}tollgate:update`;
  store = new RedisStore({ client, prefix: process.env.REDIS_PREFIX ?? 'plans:' });
  await sub.subscribe(channel);
  sub.on('message', (_channel, text) => {
    try {
      const { rule, changes } = JSON.parse(text);
      limiter.update(rule, changes); // validated: a bad message changes nothing
    } catch (err) {
      console.error('rate-limit update refused:', err.message);
    }
  });
  publishUpdate = (rule, changes) => client.publish(channel, JSON.stringify({ rule, changes }));
  closeRedis = () => {
    sub.disconnect();
    client.disconnect();
  };
}

const app = express();
app.use(express.json());

// Authentication: the tenant of the API key, read from the database (undefined without one).
app.use(async (req, _res, next) => {
  try {
    const apiKey = req.get('x-api-key');
    req.tenant = apiKey ? await db.tenantByApiKey(apiKey) : undefined;
    next();
  } catch (err) {
    next(err);
  }
});

const byTenant = tenant((req) => req.tenant?.id);
const limiter = rateLimit({
  store,
  trustProxy: process.env.TRUST_PROXY ?? false,
  rules: [{ name: 'ip', rate: '1000/min' }],
  // One group: the three plans count alike (same algorithm and window), so a tenant that
  // changes plan keeps what it has used in the window.
  tiers: {
    free: [{ name: 'free', key: byTenant, limit: 5, window: '1m', group: 'plan', blockFor: '5m' }],
    pro: [{ name: 'pro', key: byTenant, limit: 50, window: '1m', group: 'plan' }],
    enterprise: [{ name: 'enterprise', key: byTenant, limit: (req) => db.quotaOf(req.tenant.id), window: '1m', group: 'plan' }],
  },
  // Signed-out requests get the free tier, whose key is then undefined: only `ip` applies.
  tier: (req) => req.tenant?.plan ?? 'free',
});

// ---- The admin API, before the limiter: an operator is never rate limited out of it. ----
const admin = express.Router();
admin.use((req, res, next) => {
  if (req.get('x-admin-token') !== ADMIN_TOKEN) return res.status(401).json({ error: 'admin token required' });
  next();
});

// Move a tenant to another plan (the database is the source of truth). The plans share
// one group, so the minute's count carries over, and so does a block: an upgrade lifts
// it (the customer has just paid to get in), a downgrade keeps it.
admin.put('/tenants/:id/plan', async (req, res) => {
  const plan = req.body?.plan;
  if (!PLANS.includes(plan)) return res.status(400).json({ error: `plan must be one of ${PLANS.join(', ')}` });
  const previous = tenants.get(req.params.id)?.plan;
  if (!(await db.setPlan(req.params.id, plan))) return res.status(404).json({ error: 'no such tenant' });
  if (PLANS.indexOf(plan) > PLANS.indexOf(previous)) await limiter.unblock(plan, req.params.id, await valuesOf(plan, req.params.id));
  res.json({ tenant: req.params.id, plan });
});

// An enterprise tenant's negotiated limit: the rule reads it on every request.
admin.put('/tenants/:id/quota', async (req, res) => {
  const limit = req.body?.limit;
  if (!Number.isSafeInteger(limit) || limit < 1) return res.status(400).json({ error: 'limit must be a positive whole number' });
  if (!(await db.setQuota(req.params.id, limit))) return res.status(404).json({ error: 'no such tenant' });
  res.json({ tenant: req.params.id, limit });
});

// A tier's limit for every tenant on it, in place: validated, then sent to every instance.
admin.put('/tiers/:rule', async (req, res) => {
  const changes = { limit: req.body?.limit };
  try {
    limiter.update(req.params.rule, changes);
  } catch (err) {
    return res.status(400).json({ error: err.message, code: err.code });
  }
  await publishUpdate(req.params.rule, changes);
  res.json({ rule: req.params.rule, ...changes });
});

// Operations by key: the state of a tenant (or an address, for `ip`), unblock, reset.
// The enterprise rule's limit is a function of the request, so an operation on it is told
// the tenant's negotiated limit, read as the rule reads it.
const valuesOf = async (rule, key) => (rule === 'enterprise' ? { limit: await db.quotaOf(key) } : undefined);
const keyOf = (req) => (req.params.rule === 'ip' ? ipKey(req.params.key) : req.params.key);
const keyOp = (op) => async (req, res) => {
  try {
    const state = await op(req.params.rule, keyOf(req));
    res.json(state ?? { rule: req.params.rule, key: req.params.key, reset: true });
  } catch (err) {
    res.status(err.code === 'TG_UNKNOWN_RULE' || err.code === 'TG_INVALID_KEY' ? 400 : 500).json({ error: err.message, code: err.code });
  }
};
admin.get(
  '/keys/:rule/:key',
  keyOp(async (rule, key) => limiter.get(rule, key, await valuesOf(rule, key))),
);
admin.post(
  '/keys/:rule/:key/unblock',
  keyOp(async (rule, key) => limiter.unblock(rule, key, await valuesOf(rule, key))),
);
admin.post(
  '/keys/:rule/:key/reset',
  keyOp((rule, key) => limiter.reset(rule, key)),
);

app.use('/admin', admin);

// ---- The API. ----
app.use(limiter);

app.get('/api/reports', (req, res) => {
  if (!req.tenant) return res.status(401).json({ error: 'X-Api-Key required' });
  const rule = req.rateLimit?.rules.find((r) => PLANS.includes(r.name));
  res.json({ tenant: req.tenant.id, plan: req.tenant.plan, limit: rule?.limit, remaining: rule?.remaining, reports: [] });
});

const port = Number(process.env.PORT ?? 3000);
const server = app.listen(port, () => {
  console.log(`plans listening on http://localhost:${server.address().port}/`);
});
const stop = () => {
  server.close();
  closeRedis();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
