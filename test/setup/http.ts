/**
 * Loopback HTTP for the cross-package suites (control suites, HTTP scenarios): real
 * sockets (the client address and disconnects matter), one connection per request, and
 * a way to hang up mid-request.
 */
import http from 'node:http';

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: JSON bodies are inspected field by field
  body: any;
}

export interface Sent {
  /** Settles with the reply; rejects if the request was aborted or failed. */
  reply: Promise<Reply>;
  /** Destroys the client socket (the client disconnects). */
  hangUp(): void;
}

export interface SendOptions {
  path?: string;
  method?: string;
  headers?: Record<string, string>;
  /** Connect from this loopback address. @default '127.0.0.1' */
  from?: string;
}

export function send(port: number, o: SendOptions = {}): Sent {
  let req!: http.ClientRequest;
  const reply = new Promise<Reply>((resolve, reject) => {
    req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: o.method ?? 'GET',
        path: o.path ?? '/',
        headers: o.headers ?? {},
        localAddress: o.from ?? '127.0.0.1',
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
  return {
    reply,
    hangUp() {
      reply.catch(() => {});
      req.destroy();
    },
  };
}
