// One HTTP benchmark variant (../http/variants.mjs, started by ../http/server.mjs) for the
// Redis instruction-count benchmark (redis-http.mjs), run under valgrind without IPC:
// `node http-server.mjs "<variant>" <redisPort>` prints "ready <port>" once it listens on a
// free loopback port, and exits on SIGTERM.
import http from 'node:http';

// Under valgrind everything is ~50x slower: idle keep-alive sockets must not be closed
// under the client's feet (Express' server would close them after 5 s). Every variant's
// server is an http.Server, Express' and Fastify's alike.
const listen = http.Server.prototype.listen;
http.Server.prototype.listen = function (...args) {
  this.keepAliveTimeout = 600_000;
  return listen.apply(this, args);
};
// Under valgrind a Redis answer can take longer than RedisStore's 100 ms deadline, and such a
// decision is the local fallback's, not Redis': one deadline that a run never reaches.
process.env.BENCH_REDIS_TIMEOUT_MS ??= '600000';
// server.mjs reports its port over IPC, which a process under valgrind has not: on stdout.
process.send ??= (m) => {
  if (m?.port !== undefined) console.log(`ready ${m.port}`);
  return true;
};
process.on('SIGTERM', () => process.exit(0));
await import('../http/server.mjs');
