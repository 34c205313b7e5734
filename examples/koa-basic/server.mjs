// A Koa app with tollgate: a slow-down, an app-level limit per client address, and a
// route whose own rule joins it in one decision (limiter.route on @koa/router).
// `node server.mjs`, then `curl -i http://127.0.0.1:3000/search` four times.
import Router from '@koa/router';
import { rateLimit, slowDown } from '@tollgate/koa';
import Koa from 'koa';

const app = new Koa();
const router = new Router();
const throttle = slowDown({ window: '10s', delayAfter: 20, delay: 250 });
const limiter = rateLimit({ rules: [{ name: 'ip', rate: '100/min' }] });

router.get('/', (ctx) => {
  ctx.body = { hello: 'world' };
});
// Three searches a minute per client, decided with the app-level rule.
router.get('/search', limiter.route({ rules: [{ name: 'search', limit: 3, window: '1m', algorithm: 'sliding-log' }] }), (ctx) => {
  ctx.body = { results: [], remaining: ctx.state.rateLimit?.rules.map((r) => [r.name, r.remaining]) };
});

app.use(throttle);
app.use(limiter);
app.use(router.routes());

const port = Number(process.env.PORT ?? 3000);
const server = app.listen(port, '127.0.0.1', () => console.log(`koa-basic listening on http://127.0.0.1:${server.address().port}/`));
process.on('SIGINT', () => {
  server.close();
  throttle.close();
});
