/**
 * Telling the app's own bugs from store failures, for every adapter.
 *
 * A store that fails goes through the `onStoreError` policy (by default the request is
 * let through); a key, cost or skip function of the app that throws is a bug in the
 * app and belongs to the framework's error handler. Both reach an adapter as a
 * rejected `limiter.consume()`, so the app's functions are wrapped once, at
 * construction, and whatever they throw is marked here.
 */
import { configError, describe, type TollgateError } from './errors.js';
import type { Rule } from './rules.js';

const marked = new WeakSet<object>();

/** Marks a value thrown by the app's own code; returns it as an object (wrapping primitives). */
export function markAppError(err: unknown): object {
  const e = typeof err === 'object' && err !== null ? err : new Error(String(err));
  marked.add(e);
  return e;
}

/** True when `err` was thrown by a function of the app wrapped with {@link guardAppFn}. */
export function isAppError(err: unknown): boolean {
  return typeof err === 'object' && err !== null && marked.has(err);
}

/** A callback's result of the wrong type at request time: the app's error, coded. */
export function callbackResultError(path: string, expected: string, received: unknown, fix: string): TollgateError {
  return markAppError(configError('TG_INVALID_CALLBACK_RESULT', { path, expected, received: describe(received), fix })) as TollgateError;
}

/** Wraps an app function so that whatever it throws is marked as the app's error. */
export function guardAppFn<A extends unknown[], T>(f: (...args: A) => T): (...args: A) => T {
  return function guarded(...args: A): T {
    try {
      return f(...args);
    } catch (err) {
      throw markAppError(err);
    }
  };
}

/**
 * Copies a stack with every key and cost function wrapped by {@link guardAppFn}. A
 * value that is not an array is returned as is (the limiter reports it); an entry that
 * is not an object throws `TG_INVALID_OPTION` at `path[i]`.
 */
export function guardRules<R>(rules: readonly Rule<R>[], path: string): Rule<R>[] {
  if (!Array.isArray(rules)) return rules as Rule<R>[];
  return rules.map((rule, i) => {
    if (typeof rule !== 'object' || rule === null) {
      throw configError('TG_INVALID_OPTION', {
        path: `${path}[${i}]`,
        expected: 'a rule object',
        received: describe(rule),
        fix: "Pass { name, rate: '100/min' }.",
      });
    }
    const out: Rule<R> = { ...rule };
    if (typeof rule.key === 'function') out.key = guardAppFn(rule.key);
    if (typeof rule.cost === 'function') out.cost = guardAppFn(rule.cost);
    if (typeof rule.limit === 'function') out.limit = guardAppFn(rule.limit);
    if (typeof rule.burst === 'function') out.burst = guardAppFn(rule.burst);
    return out;
  });
}

/**
 * A control's `skip(req)`, awaited: a throw or a rejection is the app's error, and anything
 * but `true` or `false` is a coded error, never a pass (so an async skip cannot switch a
 * control off by returning a promise).
 */
export async function skipOf<R>(skip: ((req: R) => unknown) | undefined, path: string, req: R): Promise<boolean> {
  if (skip === undefined) return false;
  let v: unknown;
  try {
    v = await skip(req);
  } catch (err) {
    throw markAppError(err);
  }
  if (v === true || v === false) return v;
  throw callbackResultError(`${path}.skip`, 'true or false (or a promise of one)', v, 'Return a boolean: true skips the request.');
}
