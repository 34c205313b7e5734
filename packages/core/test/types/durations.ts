/**
 * Type test of durations and rates, compiled by tsc (packages/core/test/duration-types.test.ts
 * and `pnpm typecheck`): every line marked `@ts-expect-error` must be a type error, and
 * every other line must compile. An unused `@ts-expect-error` is itself an error.
 */
import { createLimiter, createThrottle, type Duration, type Rate, type Rule } from '@tollgate/core';

export const accepted: Duration[] = [250, '250ms', '1.5s', '15m', '1min', '1 minute', '2 hours', '1d', '1w', '3 weeks', '10 sec'];
export const rates: Rate[] = ['100/min', '10/sec', '100/hour', '5/15m', '100/1m', '5 per minute', '5 per 15 minutes', '1000/h'];

// @ts-expect-error 'minuets' is not a unit
export const typoUnit: Duration = '15 minuets';
// @ts-expect-error a duration string needs a unit
export const bare: Duration = '100';
// @ts-expect-error years are not a fixed length and are not offered
export const year: Duration = '1y';
// @ts-expect-error units are lower case ('1M': a month or a minute?)
export const upper: Duration = '1M';
// @ts-expect-error 'sek' is not a unit
export const typoRate: Rate = '10/sek';
// @ts-expect-error a rate needs '/' or ' per '
export const noSlash: Rate = '10 sec';

export const limiter = createLimiter({
  rules: [
    { name: 'a', limit: 5, window: '1 minute' },
    { name: 'b', rate: '10/sec' },
    { name: 'c', rate: '100 per hour', blockFor: '15m' },
    // @ts-expect-error a misspelt window unit is flagged where the rule is written
    { name: 'd', limit: 5, window: '1 mintue' },
    // @ts-expect-error a misspelt rate unit too
    { name: 'e', rate: '100/hr s' },
  ],
});

// A rule declared apart from the call keeps its literal types with `satisfies`.
export const declared = { name: 'login', limit: 5, window: '15m' } satisfies Rule;
export const t = createThrottle({ window: '1 minute', delayAfter: 5, maxDelay: '5s' });
