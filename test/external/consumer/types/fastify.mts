import tollgate, { concurrency, shed, slowDown } from '@tollgate/fastify';
import Fastify from 'fastify';

const app = Fastify();
await app.register(tollgate, { rules: [{ name: 'ip', rate: '300/min' }] });
await app.register(slowDown, { window: '10s', delayAfter: 5, delay: 500 });
await app.register(concurrency, { max: 3 });
await app.register(shed, { maxInFlight: 500 });
app.post('/export', { config: { rateLimit: { rules: [{ name: 'export', limit: 10, window: '1h' }] } } }, async () => 'ok');
app.get('/healthz', { config: { rateLimit: false } }, async () => 'ok');

export { app };
