// One HTTP benchmark variant (../http/variants.mjs) for the Redis instruction-count
// benchmark (redis-http.mjs): `node http-server.mjs "<variant>" <redisPort>`; prints
// "ready <port>" once it listens on a free loopback port. Keep-alive sockets stay open
// between batches (everything is ~50x slower under valgrind).
import { variants } from '../http/variants.mjs';

const [name, redisPort] = process.argv.slice(2);
const make = variants[name];
if (!make) {
  console.error(`unknown variant ${name}; known: ${Object.keys(variants).join(', ')}`);
  process.exit(2);
}
const server = await make({ redisPort: Number(redisPort) || undefined });
const { port } = await server.listen();
console.log(`ready ${port}`);
process.on('SIGTERM', async () => {
  await server.close().catch(() => {});
  process.exit(0);
});
