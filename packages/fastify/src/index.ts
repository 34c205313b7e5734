/**
 * @tollgate/fastify — the Fastify 5 plugin.
 *
 * `await app.register(tollgate, { rules })`, per route `config.rateLimit`; the key
 * extractors and the types users write rules with are re-exported so an app needs one
 * import.
 *
 * @module @tollgate/fastify
 */
import './augment.js';
import { tollgate } from './plugin.js';

export * from '@tollgate/core/essentials';
export {
  type ClientAddressOptions,
  type ConcurrencyPluginOptions,
  type ControlHook,
  concurrency,
  concurrencyHook,
  type SlowDownOptions,
  shed,
  shedHook,
  slowDown,
  slowDownHook,
} from './controls.js';
export type { RouteRateLimit, StoreErrorPolicy, TollgateHook, TollgateOptions } from './options.js';
export { tollgate };
export default tollgate;
