// One HTTP benchmark variant (../http/variants.mjs) for the Redis instruction-count
// benchmark (redis-http.mjs): `node http-server.mjs "<variant>" <redisPort>`; prints
// "ready <port>" once it listens on a free loopback port.
import http from 'node:http';
import { variants } from '../http/variants.mjs';

// Under valgrind everything is ~50x slower: idle keep-alive sockets must not be closed
// under the client's feet (Express' server would close them after 5 s). Every variant's
// server is an http.Server, Express' and Fastify's alike.
const listen = http.Server.prototype.listen;
http.Server.prototype.listen = function (...args) {
  this.keepAliveTimeout = 600_000;
  return listen.apply(this, args);
};

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
