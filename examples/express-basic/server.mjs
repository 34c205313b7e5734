// One limit for the whole app: 5 requests per 10 seconds per client address, counted in
// memory. Run: pnpm --filter @tollgate-examples/express-basic start (see README.md).
import { rateLimit } from '@tollgate/express';
import express from 'express';

const app = express();

app.use(
  rateLimit({
    rules: [{ name: 'ip', rate: '5/10s' }],
    // Behind nginx or a load balancer on this machine, name it here (docs/keys-and-proxies.md).
    trustProxy: process.env.TRUST_PROXY ?? false,
  }),
);

app.get('/', (req, res) => {
  const [rule] = req.rateLimit?.rules ?? [];
  res.json({ hello: 'world', remaining: rule?.remaining });
});

const port = Number(process.env.PORT ?? 3000);
const server = app.listen(port, () => {
  console.log(`express-basic listening on http://localhost:${server.address().port}/`);
  console.log('try: for i in 1 2 3 4 5 6; do curl -si http://localhost:%d/ | head -n 1; done', server.address().port);
});
