// A plain node:http server with tollgate: a slow-down in front of a two-rule limit.
// `node server.mjs`, then `curl -i http://127.0.0.1:3000/` a few times.
import http from 'node:http';
import { rateLimit, slowDown, user } from '@tollgate/node';

const throttle = slowDown({ window: '10s', delayAfter: 5, delay: 250 });
const limit = rateLimit({
  rules: [
    { name: 'ip', rate: '20/min' },
    { name: 'user', key: user((req) => req.headers['x-user']), rate: '10/min' },
  ],
});

const server = http.createServer(async (req, res) => {
  // Each call answers refusals itself and resolves false; true means go on.
  if (!(await throttle(req, res))) return;
  if (!(await limit(req, res))) return;
  res.setHeader('Content-Type', 'application/json');
  res.end(JSON.stringify({ hello: 'world', remaining: req.rateLimit?.rules.map((r) => [r.name, r.remaining]) }));
});

const port = Number(process.env.PORT ?? 3000);
server.listen(port, '127.0.0.1', () => console.log(`node-basic listening on http://127.0.0.1:${server.address().port}/`));
process.on('SIGINT', () => {
  server.close();
  throttle.close();
});
