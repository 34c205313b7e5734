/**
 * Loopback downloads for the shaping suite: a real HTTP client reading as fast as it
 * can, recording when each body byte arrived (ms since the download started).
 */
import http from 'node:http';

export interface Download {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** [arrival ms, body bytes so far], one per data event. */
  samples: Array<[number, number]>;
  bytes: number;
  /** ms from the request to the last byte. */
  ms: number;
}

export interface DownloadOptions {
  headers?: Record<string, string>;
  method?: string;
  /** Leave after this many body bytes (the socket is destroyed). */
  leaveAfter?: number;
  /** A shared clock origin, so that parallel downloads' samples line up. */
  t0?: number;
}

export function download(port: number, path: string, o: DownloadOptions = {}): Promise<Download> {
  const t0 = o.t0 ?? performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: o.method ?? 'GET', headers: o.headers, agent: false }, (res) => {
      const d: Download = { status: res.statusCode ?? 0, headers: res.headers, samples: [], bytes: 0, ms: 0 };
      res.on('data', (chunk: Buffer) => {
        d.bytes += chunk.length;
        d.samples.push([performance.now() - t0, d.bytes]);
        if (o.leaveAfter !== undefined && d.bytes >= o.leaveAfter) {
          req.destroy();
          d.ms = performance.now() - t0;
          resolve(d);
        }
      });
      res.on('end', () => {
        d.ms = performance.now() - t0;
        resolve(d);
      });
      res.on('error', (err) => (o.leaveAfter === undefined ? reject(err) : undefined));
    });
    req.on('error', (err) => (o.leaveAfter === undefined ? reject(err) : undefined));
    req.end();
  });
}

/**
 * The most bytes received in any window of length T, minus what `burst + rate·T` allows:
 * positive when the bound is broken (with `slackMs` of receive latency granted, since a
 * byte sent just before a window may arrive in it).
 */
export function worstExcess(samples: Array<[number, number]>, burst: number, rate: number, slackMs: number): number {
  // Every window that matters starts just after one arrival and ends at a later one.
  const points: Array<[number, number]> = [[0, 0], ...samples];
  let worst = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < points.length; i++) {
    const [ti, bi] = points[i] as [number, number];
    for (let j = i + 1; j < points.length; j++) {
      const [tj, bj] = points[j] as [number, number];
      const allowed = burst + (rate * (tj - ti + slackMs)) / 1000;
      worst = Math.max(worst, bj - bi - allowed);
    }
  }
  return worst;
}

/** Merges parallel downloads' samples (shared origin) into one cumulative series. */
export function merged(downloads: Download[]): Array<[number, number]> {
  const events: Array<[number, number]> = [];
  for (const d of downloads) {
    let prev = 0;
    for (const [t, b] of d.samples) {
      events.push([t, b - prev]);
      prev = b;
    }
  }
  events.sort((a, b) => a[0] - b[0]);
  let total = 0;
  return events.map(([t, n]) => {
    total += n;
    return [t, total];
  });
}
