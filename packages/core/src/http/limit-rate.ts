/**
 * The flow of `limitRate`, the byte-rate control, written once for every framework: find
 * the response's key, open a grant on its bucket, pace the body, go on. Deciding is the
 * core control's (`createByteRate`); pacing is the port's `paceBody` (a Node-based port's
 * from `@tollgate/core/node`, a Web one's through `paceStream`), or one given here.
 *
 * It refuses nothing and writes no header. A store that fails lets the body through
 * unpaced; a key or skip function that throws is the app's error.
 */
import { isAppError } from '../app-errors.js';
import { type ByteGrant, type ByteRateLimit, type ByteRateOptions, createByteRate } from '../controls/byte-rate.js';
import { publishStoreError } from '../diagnostics.js';
import { TollgateError } from '../errors.js';
import { compileHeaders, type HeadersOption } from '../headers.js';
import { type ClientAddressOptions, splitClientAddress } from '../http-options.js';
import { type AccessList, compileAccess } from './access.js';
import { type HttpPort, writeFields } from './port.js';

export interface LimitRateFlowOptions<Req> extends Omit<ByteRateOptions<Req>, 'defaultKey'>, ClientAddressOptions {
  /**
   * Clients never paced: addresses and CIDRs matched on the client address as the default
   * key finds it with `trustProxy`, or a function `(req) => boolean`.
   * @example allow: ['10.0.0.0/8']
   */
  allow?: AccessList<Req>;
  /**
   * Rate-limit headers carrying the key's bucket (bytes it holds as `r`, refilled at `rate`
   * per second), read once per response without taking anything. Off by default: the
   * control refuses nothing, and `r=0` would tell RateLimit-aware clients to stop; with
   * headers on, `r` is never below 1.
   * @default false
   */
  headers?: HeadersOption;
}

/** How a port paces a response body through a grant, the first `after` bytes unpaced. */
export type PaceBody<Req, Res> = (req: Req, res: Res, grant: ByteGrant, after: number) => void;

/**
 * The byte-rate control's flow.
 * @example const { stage, limit } = limitRateFlow(port, { rate: '2MB/s', burst: '16MB' })
 */
export function limitRateFlow<Req, Res, Next>(
  port: HttpPort<Req, Res, Next>,
  options: LimitRateFlowOptions<Req>,
  paceBody?: PaceBody<Req, Res>,
): { stage: (req: Req, res: Res, next: Next) => void; limit: ByteRateLimit<Req>; close(): Promise<void> } {
  const { allow, headers, ...rest } = options ?? ({} as LimitRateFlowOptions<Req>);
  const [core, defaultKey] = splitClientAddress<Req, typeof rest>(rest);
  const limit = createByteRate<Req>({ ...core, defaultKey } as ByteRateOptions<Req>);
  const access = compileAccess<Req>(allow, undefined, { path: 'limitRate', trustProxy: rest.trustProxy });
  const format = headers === undefined ? undefined : compileHeaders(headers);
  const pace = paceBody ?? port.paceBody?.bind(port);
  if (pace === undefined)
    throw new TollgateError('TG_INVALID_OPTION', `limitRate: the ${port.name} port cannot pace a response body (it has no paceBody)`);

  // The bucket's figures as headers, when asked for: a refusal is never announced (r >= 1).
  const withHeaders = async (req: Req, res: Res): Promise<ByteGrant | undefined> => {
    const grant = await limit.open(req);
    if (grant === undefined || format === undefined) return grant;
    try {
      const r = await limit.figures(req);
      if (r !== undefined)
        writeFields(port, res, format([{ ...r, allowed: true, remaining: Math.max(1, r.remaining) }], rest.clock?.now() ?? Date.now()));
    } catch (err) {
      grant.close();
      throw err;
    }
    return grant;
  };

  const paced = (req: Req, res: Res, next: Next): void => {
    withHeaders(req, res).then(
      (grant) => {
        if (grant !== undefined) {
          // The client left while the key was found: nothing to pace, free the share now.
          if (port.isGone(req, res)) grant.close();
          else pace(req, res, grant, limit.after);
        }
        port.pass(next);
      },
      (err) => {
        if (isAppError(err)) {
          port.fail(next, err);
          return;
        }
        publishStoreError(err, req, limit.name, 'allow');
        port.pass(next);
      },
    );
  };
  const stage =
    access === undefined
      ? paced
      : (req: Req, res: Res, next: Next) =>
          access(
            req,
            (verdict) => (verdict === 'allow' ? port.pass(next) : paced(req, res, next)),
            (err) => port.fail(next, err),
          );
  return { stage, limit, close: () => limit.close() };
}
