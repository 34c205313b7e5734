/**
 * A TCP proxy on loopback that forwards bytes both ways with an added delay that can be
 * switched on and off while connections are open: a slow network or a slow Redis as the
 * app sees it. Order is kept: a chunk never leaves before one that arrived earlier, even
 * when the delay is switched off while chunks are still held.
 */
import { createServer, type Server, Socket } from 'node:net';

export class DelayProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #delayMs = 0;
  port = 0;

  constructor(readonly targetPort: number) {
    this.#server = createServer((down) => this.#connect(down));
  }

  /** Listens on `port` (0: a free one); again on the same port after `close`, as a Redis that comes back. */
  async listen(port = 0): Promise<number> {
    await new Promise<void>((r) => this.#server.listen(port, '127.0.0.1', r));
    this.port = (this.#server.address() as { port: number }).port;
    return this.port;
  }

  /** Delay added to every chunk from now on, in ms (0: forward at once). */
  set delayMs(ms: number) {
    this.#delayMs = ms;
  }

  get delayMs(): number {
    return this.#delayMs;
  }

  /** Drops every connection (chunks held are lost) and refuses new ones until `listen` again. */
  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }

  #connect(down: Socket): void {
    const up = new Socket();
    this.#sockets.add(down);
    this.#sockets.add(up);
    const end = () => {
      down.destroy();
      up.destroy();
      this.#sockets.delete(down);
      this.#sockets.delete(up);
    };
    down.on('error', end).on('close', end);
    up.on('error', end).on('close', end);
    up.connect(this.targetPort, '127.0.0.1');
    this.#pipe(down, up);
    this.#pipe(up, down);
  }

  /** Forwards `from` to `to`, each chunk at max(arrival + delay, previous departure). */
  #pipe(from: Socket, to: Socket): void {
    const queue: { at: number; chunk: Buffer }[] = [];
    let timer: NodeJS.Timeout | undefined;
    const drain = () => {
      timer = undefined;
      while (queue.length > 0) {
        const head = queue[0] as { at: number; chunk: Buffer };
        const wait = head.at - Date.now();
        if (wait > 0) {
          timer = setTimeout(drain, wait);
          return;
        }
        queue.shift();
        if (!to.destroyed) to.write(head.chunk);
      }
    };
    from.on('data', (chunk: Buffer) => {
      const prev = queue.at(-1)?.at ?? 0;
      queue.push({ at: Math.max(Date.now() + this.#delayMs, prev), chunk });
      if (timer === undefined) drain();
    });
    from.on('close', () => clearTimeout(timer));
  }
}
