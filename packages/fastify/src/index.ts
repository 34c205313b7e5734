/**
 * @tollgate/fastify — the Fastify 5 plugin.
 *
 * `await app.register(tollgate, { rules })`, per route `config.rateLimit`; the controls;
 * the key extractors and the types users write rules with, re-exported so an app needs
 * one import.
 *
 * @module @tollgate/fastify
 */
import './augment.js';
import { tollgate } from './plugin.js';

export type { RuleChanges } from '@tollgate/core';
export * from '@tollgate/core/essentials';
export type { TollgateInstance } from './augment.js';
export * from './controls.js';
export type { RouteRateLimit, StoreErrorPolicy, TollgateHook, TollgateOptions } from './options.js';
export { tollgate };
export default tollgate;
