/**
 * What runs before a stack decides: the app's `skip` and the allow and deny lists. A
 * request they let through without a decision (skipped, allowed) is marked with `mark`, so
 * that the adapter's route stages let it through too.
 */
import { type Access, deniedRefusal } from './access.js';
import { asSkip, call, settle } from './callbacks.js';
import { type HttpPort, refusedAfterHead, sendRefusal } from './port.js';

/** Runs the gate, then `go` when the request is to be decided. */
export type Gate<Req, Res, Next> = (req: Req, res: Res, next: Next, go: () => void) => void;

/** `skip` → `go`; a throw or a bad result goes to the app's error handler. */
export function skipGate<Req, Res, Next>(
  port: HttpPort<Req, Res, Next>,
  skip: (req: Req, res: Res) => unknown,
  path: string,
  mark: ((req: Req) => void) | undefined,
): Gate<Req, Res, Next> {
  const checkSkip = asSkip(path);
  return (req, res, next, go) => {
    let result: unknown;
    try {
      result = call(skip, req, res);
    } catch (err) {
      port.fail(next, err);
      return;
    }
    settle(
      result,
      checkSkip,
      (skipped) => {
        if (!skipped) return go();
        mark?.(req);
        port.pass(next);
      },
      (err) => port.fail(next, err),
    );
  };
}

/**
 * The allow and deny lists → `go`. A denied request is answered 403 (a dry run lets it on
 * to the rules); an allowed one is let through undecided.
 */
export function accessGate<Req, Res, Next>(
  port: HttpPort<Req, Res, Next>,
  access: Access<Req>,
  dryRun: boolean,
  mark: ((req: Req) => void) | undefined,
): Gate<Req, Res, Next> {
  return (req, res, next, go) => {
    access(
      req,
      (verdict) => {
        if (verdict === undefined || (verdict === 'deny' && dryRun)) return go();
        if (verdict === 'deny') {
          // After a handler started the response a 403 cannot be written: cut off, as a refusal.
          if (!refusedAfterHead(port, res, next)) sendRefusal(port, res, deniedRefusal());
          return;
        }
        mark?.(req);
        port.pass(next);
      },
      (err) => port.fail(next, err),
    );
  };
}
