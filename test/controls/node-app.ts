/**
 * The control scenario app on plain node:http (see suite.ts for the contract): the
 * stages of @tollgate/node awaited in order, then the behaviour.
 */
import http from 'node:http';
import { concurrency, type NodeLimiter, rateLimit, shed, slowDown } from '@tollgate/node';
import type { ControlAppSpec, ListeningControlApp, Stage } from './suite.js';

function mount(stage: Stage): { run: NodeLimiter; close: () => unknown } {
  // Errors of the app's callbacks: a plain 500, as the other adapters' error handlers answer.
  const onError = (_err: unknown, _req: http.IncomingMessage, res: http.ServerResponse) => {
    res.statusCode = 500;
    res.end('error');
  };
  switch (stage.kind) {
    case 'slowDown': {
      const m = slowDown({ ...(stage.options as never as object), onError } as never);
      return { run: m, close: () => m.close() };
    }
    case 'rateLimit':
      return { run: rateLimit({ ...(stage.options as never as object), onError } as never), close: () => {} };
    case 'concurrency': {
      const m = concurrency({ ...(stage.options as never as object), onError } as never);
      return { run: m, close: () => m.close() };
    }
    case 'shed': {
      const m = shed({ ...(stage.options as never as object), onError } as never);
      return { run: m, close: () => m.close() };
    }
  }
}

export async function nodeControlApp(spec: ControlAppSpec): Promise<ListeningControlApp> {
  const mounted = spec.stages.map(mount);
  const server = http.createServer(async (req, res) => {
    for (const m of mounted) if (!(await m.run(req, res))) return;
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    spec.onStart(path, req);
    const json = (status: number) => {
      res.statusCode = status;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ path, start: spec.clock.now(), rateLimit: req.rateLimit ?? null }));
    };
    const b = spec.behaviour(path);
    switch (b.kind) {
      case 'ok':
        return json(200);
      case 'status':
        return json(b.status);
      case 'slow':
        spec.timers.setTimeout(() => json(200), b.ms);
        return;
      case 'throw':
        res.statusCode = 500;
        res.end('error');
        return;
      case 'stream': {
        let i = 0;
        const tick = () => {
          res.write(`chunk${i++}`);
          if (i < b.chunks) spec.timers.setTimeout(tick, b.everyMs);
          else res.end();
        };
        tick();
        return;
      }
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      for (const m of mounted) await m.close();
    },
  };
}
