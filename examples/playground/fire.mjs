// Fires a run's arrival pattern from the server itself, through a loopback HTTP client,
// at the pattern's times. A browser opens at most six connections to one server and holds
// every request past the sixth until one of them is answered, so a pattern sent from the
// page reaches the server spaced out whenever requests are held (a leaky-bucket queue
// holds them all); this client opens a connection per request in flight, so the server
// sees the arrivals the user chose.
import http from 'node:http';
import { performance } from 'node:perf_hooks';

/** Connections opened before the first arrival. */
const WARM = 50;

/**
 * Opens connections to `host:port` (a GET of `warmPath` on each), calls `started()`, then
 * sends request `i` of `arrivals` to `path(i)` at `arrivals[i].t` ms from then, calling
 * `answered(i, status)` as each is answered (status 0 when it failed).
 * Resolves when every request is answered; never rejects.
 */
export async function firePattern({ host, port, arrivals, path, answered, warmPath, started }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  try {
    // Open the connections first (up to WARM of them, kept alive for the run), so the start
    // of a burst is not spread out by connection set-up.
    await Promise.all(
      Array.from(
        { length: Math.min(WARM, arrivals.length) },
        () =>
          new Promise((resolve) => {
            const req = http.get({ host, port, agent, path: warmPath }, (res) => {
              res.resume();
              res.once('end', resolve);
              res.once('error', resolve);
            });
            req.once('error', resolve);
          }),
      ),
    );
    started();
    const start = performance.now();
    await Promise.all(
      arrivals.map(
        (a, i) =>
          new Promise((resolve) => {
            const send = () => {
              const req = http.request({ host, port, agent, method: 'POST', path: path(i), headers: { 'content-length': '0' } }, (res) => {
                res.resume();
                res.once('end', () => {
                  answered(i, res.statusCode ?? 0);
                  resolve();
                });
                res.once('error', () => {
                  answered(i, 0);
                  resolve();
                });
              });
              req.once('error', () => {
                answered(i, 0);
                resolve();
              });
              req.end();
            };
            const wait = a.t - (performance.now() - start);
            if (wait <= 0) send();
            else setTimeout(send, wait);
          }),
      ),
    );
  } finally {
    agent.destroy();
  }
}
