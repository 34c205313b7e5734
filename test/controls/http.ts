/**
 * Loopback HTTP for the control suites: the shared client (test/setup/http.ts) and a
 * short real-time wait for I/O to arrive.
 */

export { type Reply, type SendOptions, type Sent, send } from '../setup/http.js';

/**
 * Waits (in real time) until `cond` holds: for I/O on loopback to arrive. The deadline only
 * names a hang; it is long because a busy 2-core machine can stall every worker for seconds.
 */
export async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}
