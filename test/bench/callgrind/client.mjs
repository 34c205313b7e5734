// `node client.mjs <port> <n> [connections=4]`: n GET / requests over that many keep-alive
// connections; exits non-zero unless every answer is 200.
import http from 'node:http';

const [port, n, c = 4] = process.argv.slice(2).map(Number);
const agent = new http.Agent({ keepAlive: true, maxSockets: c });
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
  Array.from({ length: c }, async (_, w) => {
    for (let i = w; i < n; i += c) await one();
  }),
);
agent.destroy();
if (ok !== n) {
  console.error(`${n - ok} of ${n} requests failed`);
  process.exit(1);
}
