import Router from '@koa/router';
import { type Decision, rateLimit, slowDown, user } from '@tollgate/koa';
import Koa, { type Context } from 'koa';

const app = new Koa();
const router = new Router();
const limiter = rateLimit({
  trustProxy: 'loopback',
  rules: [
    { name: 'ip', rate: '300/min' },
    { name: 'user', key: user((ctx: Context) => ctx.get('x-user') || undefined), rate: '100/min' },
  ],
  onRejected: (ctx: Context, decision: Decision) => {
    ctx.set('x-refused-by', decision.rejectedBy.join(','));
  },
});
app.use(limiter);
app.use(slowDown({ window: '1m', delayAfter: 10, delay: 250 }));
router.post('/login', limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m', blockFor: '1h' }] }), (ctx) => {
  const d: Decision | undefined = ctx.state.rateLimit;
  ctx.body = { remaining: d?.rules.map((r) => r.remaining) };
});
app.use(router.routes());

export { app };
