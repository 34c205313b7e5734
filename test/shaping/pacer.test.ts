/**
 * The pacer on a plain Node response (@tollgate/core/node's paceResponse, what every Node-based port uses):
 * what it holds for a client that never reads, keep-alive responses one after another,
 * and write callbacks.
 */
import http from 'node:http';
import net from 'node:net';
import { pipeline, Readable } from 'node:stream';
import { type ByteGrant, createByteRate } from '@tollgate/core';
import { limitRateFlow } from '@tollgate/core/http';
import { nodePort, type PaceState, paceResponse } from '@tollgate/core/node';
import { afterEach, describe, expect, it } from 'vitest';
import { until } from '../controls/http.js';

let server: http.Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

function listen(handler: http.RequestListener): Promise<number> {
  const s = http.createServer(handler);
  server = s;
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve((s.address() as { port: number }).port)));
}

describe('paceResponse', () => {
  it('holds at most one chunk of the source for a client that never reads', async () => {
    const limit = createByteRate({ rate: '50MB/s', burst: '1MB', key: () => 'k' });
    const CHUNK = 64 * 1024;
    let state: PaceState | undefined;
    let produced = 0;
    let most = 0;
    const port = await listen(async (req, res) => {
      const grant = await limit.open(req);
      if (grant === undefined) throw new Error('no grant');
      state = paceResponse(req, res, grant, 0);
      const source = new Readable({
        highWaterMark: CHUNK,
        read() {
          produced += CHUNK;
          this.push(Buffer.alloc(CHUNK));
        },
      });
      pipeline(source, res, () => {});
    });
    const socket = net.connect(port, '127.0.0.1');
    socket.pause();
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    let last = -1;
    await until(
      async () => {
        most = Math.max(most, state?.queued ?? 0);
        const stable = produced > 0 && produced === last;
        last = produced;
        if (!stable) await new Promise((r) => setTimeout(r, 150));
        return stable;
      },
      'the source to stop',
      8000,
    );
    expect(state?.queued ?? Number.POSITIVE_INFINITY).toBeLessThanOrEqual(CHUNK);
    expect(most).toBeLessThanOrEqual(CHUNK);
    socket.destroy();
    await until(() => state?.over === true && limit.active.responses === 0, 'the pacing over');
    expect(state?.queued).toBe(0);
    await limit.close();
  });

  it('paces keep-alive responses one after another on one connection, and runs write callbacks in order', async () => {
    const limit = createByteRate({ rate: '400KB/s', burst: '50KB', key: () => 'k' });
    const calls: string[] = [];
    const port = await listen(async (req, res) => {
      const grant = await limit.open(req);
      if (grant === undefined) throw new Error('no grant');
      paceResponse(req, res, grant, 0);
      res.setHeader('Content-Length', 120_000);
      res.write(Buffer.alloc(60_000), () => calls.push(`${req.url} 1`));
      res.write(Buffer.alloc(60_000), () => calls.push(`${req.url} 2`));
      res.end(() => calls.push(`${req.url} end`));
    });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = (path: string) =>
      new Promise<{ bytes: number; socket: unknown }>((resolve, reject) => {
        http
          .get({ host: '127.0.0.1', port, path, agent }, (res) => {
            let bytes = 0;
            res.on('data', (c: Buffer) => {
              bytes += c.length;
            });
            res.on('end', () => resolve({ bytes, socket: res.socket }));
          })
          .on('error', reject);
      });
    const t0 = performance.now();
    const a = await get('/a');
    const b = await get('/b');
    const ms = performance.now() - t0;
    agent.destroy();
    expect(a.bytes).toBe(120_000);
    expect(b.bytes).toBe(120_000);
    expect(a.socket).toBe(b.socket);
    // 240 KB less the 50 KB burst at 400 KB/s.
    expect(ms).toBeGreaterThanOrEqual(((240_000 - 50_000) / 400_000) * 1000 * 0.98);
    await until(() => calls.length === 6, 'every callback');
    expect(calls).toEqual(['/a 1', '/a 2', '/a end', '/b 1', '/b 2', '/b end']);
    await limit.close();
  });

  it("answers a write after end with Node's error and never sends it ahead of the paced body", async () => {
    const limit = createByteRate({ rate: '200KB/s', burst: '20KB', key: () => 'k' });
    const errors: string[] = [];
    let ended = 0;
    const port = await listen(async (req, res) => {
      const grant = await limit.open(req);
      if (grant === undefined) throw new Error('no grant');
      paceResponse(req, res, grant, 0);
      res.end(Buffer.alloc(60_000, 0x61), () => ended++);
      res.write('late', (err) => errors.push(String((err as { code?: string } | null | undefined)?.code)));
      res.end(() => ended++);
    });
    const body = await new Promise<Buffer>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
          const parts: Buffer[] = [];
          res.on('data', (c: Buffer) => parts.push(c));
          res.on('end', () => resolve(Buffer.concat(parts)));
        })
        .on('error', reject);
    });
    expect(body.length).toBe(60_000);
    expect(body.every((b) => b === 0x61)).toBe(true);
    await until(() => ended === 2, 'both end callbacks');
    expect(errors).toEqual(['ERR_STREAM_WRITE_AFTER_END']);
    await limit.close();
  });
});

describe('limitRate on a port of its own', () => {
  it("paces through the port's paceBody when it has one (a port answering with Web Responses)", async () => {
    const seen: number[] = [];
    const port = {
      ...nodePort,
      paceBody(req: http.IncomingMessage, res: http.ServerResponse, grant: ByteGrant, after: number) {
        seen.push(after);
        paceResponse(req, res, grant, after);
      },
    };
    const { stage, limit } = limitRateFlow(port, { rate: '1MB/s', after: '10KB', key: () => 'k' });
    const p = await listen((req, res) => stage(req, res, () => res.end('paced')));
    const body = await new Promise<string>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: p, path: '/', agent: false }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => {
            text += c.toString();
          });
          res.on('end', () => resolve(text));
        })
        .on('error', reject);
    });
    expect(body).toBe('paced');
    expect(seen).toEqual([10_000]);
    await until(() => limit.active.responses === 0, 'the response over');
    await limit.close();
  });

  it('is refused at construction on a port that cannot pace a body', () => {
    const { paceBody: _, ...port } = nodePort;
    expect(() => limitRateFlow(port, { rate: '1MB/s', key: () => 'k' })).toThrow(
      expect.objectContaining({ code: 'TG_INVALID_OPTION', message: expect.stringContaining('no paceBody') }),
    );
  });
});
