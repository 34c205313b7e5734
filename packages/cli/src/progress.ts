/**
 * A progress indicator on stderr for long simulations. Silent for runs that
 * finish within a second; after that, a line that rewrites itself on a terminal, or a
 * plain line every few seconds when stderr is a file or a pipe.
 */

export interface ProgressOptions {
  write: (text: string) => void;
  now: () => number;
  /** stderr is a terminal: redraw one line with `\r`. */
  tty: boolean;
  /** @default 'simulating' */
  label?: string;
  /** Quiet period before the first report, ms. @default 1000 */
  after?: number;
}

export interface Progress {
  update(done: number, total: number): void;
  /** Ends the indicator (clears the line on a terminal). */
  finish(): void;
}

export function createProgress(o: ProgressOptions): Progress {
  const start = o.now();
  const after = o.after ?? 1000;
  const every = o.tty ? 100 : 2000;
  const label = o.label ?? 'simulating';
  let last = Number.NEGATIVE_INFINITY;
  let shown = false;
  return {
    update(done, total) {
      const t = o.now();
      if (t - start < after || t - last < every || done >= total) return;
      last = t;
      shown = true;
      const pct = total > 0 ? Math.floor((done / total) * 100) : 100;
      const line = `${label}: ${pct}% (${done} of ${total} requests, ${((t - start) / 1000).toFixed(1)} s)`;
      o.write(o.tty ? `\r${line}\x1b[K` : `${line}\n`);
    },
    finish() {
      if (shown) o.write(o.tty ? '\r\x1b[K' : `${label}: done in ${((o.now() - start) / 1000).toFixed(1)} s\n`);
    },
  };
}
