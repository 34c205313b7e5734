/**
 * Waiting and cancellation. The client never calls `setTimeout` directly: it waits
 * through a `Sleep` function, so tests substitute a virtual scheduler and never wait on
 * the real clock.
 */

/**
 * Waits `ms` milliseconds. Must reject with `signal.reason` as soon as `signal` aborts
 * (and release its timer), and reject at once if it has already aborted.
 */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

/** setTimeout's ceiling (about 24.8 days); longer waits are chained. */
const MAX_TIMER = 2 ** 31 - 1;

/** The default `Sleep`: real timers, abortable. */
export const realSleep: Sleep = function sleep(ms, signal) {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    let left = Math.max(0, ms);
    let timer: ReturnType<typeof setTimeout>;
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const arm = () => {
      const step = Math.min(left, MAX_TIMER);
      left -= step;
      timer = setTimeout(() => {
        if (left > 0) arm();
        else {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        }
      }, step);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    arm();
  });
};

/**
 * An AbortController that aborts when any of `parents` aborts (with that parent's
 * reason). `AbortSignal.any` needs Node 20.3; this works on every Node 20. Call
 * `dispose()` to detach from the parents once done.
 */
export function linkedController(parents: readonly (AbortSignal | undefined)[]): { controller: AbortController; dispose: () => void } {
  const controller = new AbortController();
  const undo: (() => void)[] = [];
  for (const p of parents) {
    if (!p) continue;
    if (p.aborted) {
      controller.abort(p.reason);
      break;
    }
    const on = () => controller.abort(p.reason);
    p.addEventListener('abort', on, { once: true });
    undo.push(() => p.removeEventListener('abort', on));
  }
  return {
    controller,
    dispose: () => {
      for (const f of undo) f();
    },
  };
}
