import { type Io, run } from '@tollgate/cli';

/** An in-memory Io: files in a map, output collected, a clock the test moves. */
export function fakeIo(files: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const written = new Map<string, string>();
  let now = 0;
  const io: Io = {
    stdout: (t) => void out.push(t),
    stderr: (t) => void err.push(t),
    readFile: async (p) => {
      const f = files[p];
      if (f === undefined) throw Object.assign(new Error(`ENOENT: ${p}`), { code: 'ENOENT' });
      return f;
    },
    writeFile: async (p, d) => void written.set(p, d),
    now: () => now,
    isTTY: false,
  };
  return {
    io,
    written,
    stdout: () => out.join(''),
    stderr: () => err.join(''),
    tick: (ms: number) => {
      now += ms;
    },
  };
}

/** Runs the command with a fresh fake Io. */
export async function cli(argv: string[], files: Record<string, string> = {}) {
  const f = fakeIo(files);
  const code = await run(argv, f.io);
  return { code, ...f };
}
