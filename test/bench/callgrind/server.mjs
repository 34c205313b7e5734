// One Express hello-world variant for the instruction-count benchmark (run.sh):
// `node server.mjs <bare|tollgate|erl8|erl7> <port>`; prints "ready" when listening.
import { pathToFileURL } from 'node:url';
import express from 'express';

const [variant, port] = process.argv.slice(2);
const app = express();
app.disable('x-powered-by');
if (variant === 'tollgate') {
  const url = process.env.TOLLGATE_EXPRESS
    ? pathToFileURL(process.env.TOLLGATE_EXPRESS).href
    : new URL('../../../packages/express/dist/index.mjs', import.meta.url).href;
  const { rateLimit } = await import(url);
  app.use(rateLimit({ rules: [{ name: 'ip', limit: 1_000_000_000, window: '1m' }] }));
} else if (variant === 'erl8' || variant === 'erl7') {
  const { rateLimit } = await import('express-rate-limit');
  app.use(
    rateLimit({
      windowMs: 60_000,
      limit: 1_000_000_000,
      standardHeaders: variant === 'erl8' ? 'draft-8' : 'draft-7',
      legacyHeaders: false,
    }),
  );
} else if (variant !== 'bare') {
  throw new Error(`unknown variant ${variant}`);
}
app.get('/', (_req, res) => res.send('hello'));
const server = app.listen(Number(port), '127.0.0.1', () => console.log('ready'));
// Under valgrind everything is ~50x slower: keep idle keep-alive sockets open between batches.
server.keepAliveTimeout = 600_000;
