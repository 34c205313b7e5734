/**
 * Holding a request for a delay on any runtime: the port says when the client goes away.
 */
import { systemTimers, type TimerHandle, type Timers } from '../controls/timers.js';
import type { HttpPort } from './port.js';

/**
 * Waits `ms` before the request may proceed. Resolves `true` when the time has passed,
 * `false` as soon as the client goes away (the timer is then cleared, so the caller must
 * not run the handler). `ms <= 0` resolves `true` at once.
 * @example if (await holdRequest(port, req, res, d.delayMs)) port.pass(next);
 */
export function holdRequest<Req, Res, Next>(
  port: Pick<HttpPort<Req, Res, Next>, 'isGone' | 'whenGone'>,
  req: Req,
  res: Res,
  ms: number,
  timers: Timers = systemTimers,
): Promise<boolean> {
  if (port.isGone(req, res)) return Promise.resolve(false);
  if (!(ms > 0)) return Promise.resolve(true);
  return new Promise((resolve) => {
    let handle: TimerHandle;
    const stop = port.whenGone(req, res, () => {
      timers.clearTimeout(handle);
      resolve(false);
    });
    handle = timers.setTimeout(() => {
      stop();
      resolve(true);
    }, ms);
  });
}
