import { rateLimit, slowDown, user } from '@tollgate/express';
import express, { type Request } from 'express';

const app = express();
const limiter = rateLimit({
  trustProxy: 'loopback',
  rules: [
    { name: 'ip', rate: '300/min' },
    { name: 'user', key: user((req: Request) => req.get('x-user')), rate: '100/min' },
  ],
});
app.use(limiter);
app.post('/login', limiter.route({ rules: [{ name: 'login', limit: 5, window: '15m', blockFor: '1h' }] }), (_req, res) => {
  res.send('ok');
});
app.use('/search', slowDown({ window: '1m', delayAfter: 10, delay: 250 }));

export { app };
