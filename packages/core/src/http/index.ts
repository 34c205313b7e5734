/**
 * @tollgate/core/http — the request pipeline every HTTP adapter shares: the framework
 * port an adapter implements (runtime-neutral: the Node implementations are in
 * `@tollgate/core/node`), the limiter's flow (`createRateLimit`), the controls'
 * flows (`slowDownFlow`, `concurrencyFlow`, `shedFlow`), option normalisation and the
 * request-lifetime helpers. Plumbing for adapters: applications import an adapter
 * (`@tollgate/express`, `@tollgate/fastify`, `@tollgate/node`) instead.
 */
export { guardAppFn, guardRules, isAppError, markAppError } from '../app-errors.js';
export { acquireWhileConnected } from '../controls/concurrency.js';
export { hold, onceDone, type ResponseLike } from '../controls/hold.js';
export { publishControl } from '../controls/publish.js';
export { countedRules, type OnFinish, refundUncountedOnFinish } from '../count-if.js';
export { appendHeaderValue, applyHeaders } from '../headers.js';
export {
  type ClientAddressOptions,
  checkOptionNames,
  clientAddressKey,
  type HttpLimiterOptions,
  type HttpOptions,
  type HttpOptionsInput,
  type HttpOptionsWording,
  normalizeHttpOptions,
  type OptionNameFixes,
  splitClientAddress,
} from '../http-options.js';
export { clientAddress, REQUEST_READER, type RequestReader, readerOf } from '../keys.js';
export { mergeDecisions } from '../merge.js';
export { type NextAdmission, nextAdmission } from '../next-admission.js';
export { messageContentType, messageText, storeFailureRefusal } from '../response.js';
export { type Access, type AccessList, compileAccess, deniedRefusal, type Verdict } from './access.js';
export { asMessage, asSkip, isThenable, settle } from './callbacks.js';
export {
  type ConcurrencyCarried,
  type ConcurrencyFlowOptions,
  type ControlCarried,
  type ControlName,
  concurrencyFlow,
  controlMakers,
  type LimitRateCarried,
  type ShedCarried,
  type SlowDownCarried,
  type SlowDownFlowOptions,
  type Stage,
  shedFlow,
  slowDownFlow,
} from './controls.js';
export { holdRequest } from './lifetime.js';
export { type LimitRateFlowOptions, limitRateFlow, type PaceBody } from './limit-rate.js';
export { type GroupOperations, groupOperations, type LimiterMethods, limiterMethods } from './methods.js';
export {
  type AdapterWording,
  choiceOption,
  type HttpCallbackOptions,
  LIMITER_OPTION_NAMES,
  type LimiterOptionsOf,
  normalizeLimiterOptions,
  type OwnOptionChecks,
  RATE_LIMIT_WORDING,
  type RouteOptionsOf,
  type RouteOptionsShape,
  routeMode,
  routeOptionsOf,
  type StoreErrorPolicyOf,
} from './options.js';
export { paceStream } from './pace-stream.js';
export { EXPRESS_RATE_LIMIT_OPTIONS, FASTIFY_RATE_LIMIT_OPTIONS, NESTJS_THROTTLER_OPTIONS, peerHint } from './peers.js';
export {
  type HttpPort,
  localsOf,
  lowerHeaderName,
  type RequestLocals,
  readerMark,
  sendRefusal,
  writeFields,
  writeRefusalHead,
} from './port.js';
export {
  createRateLimit,
  type Decide,
  type RateLimitCore,
  type RateLimitSetup,
  type RateLimitSource,
  type RouteMode,
} from './rate-limit.js';
export type { RequestRateLimit } from './settle.js';
export {
  FORWARDED_UNTRUSTED_WARNING,
  PROXY_WARNING_CHANNEL,
  type ProxyWarningOptions,
  proxyWarnings,
  resetProxyWarnings,
  TRUST_PROXY_UNSET_WARNING,
  type WarningSource,
} from './warnings.js';
export { type GoneOverride, type WebLifetime, webLifetime } from './web.js';
