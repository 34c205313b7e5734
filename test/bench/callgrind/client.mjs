// `node client.mjs <port> <n>`: n GET / requests over 4 keep-alive connections; exits
// non-zero unless every answer is 200.
import http from 'node:http';

const [port, n] = process.argv.slice(2).map(Number);
const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
let ok = 0;
const one = () =>
  new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode === 200) ok++;
          resolve();
        });
      })
      .on('error', reject);
  });
await Promise.all(
  Array.from({ length: 4 }, async (_, w) => {
    for (let i = w; i < n; i += 4) await one();
  }),
);
agent.destroy();
if (ok !== n) {
  console.error(`${n - ok} of ${n} requests failed`);
  process.exit(1);
}
