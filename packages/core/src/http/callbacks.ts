/**
 * The app's callbacks at request time (skip, message, handler, delay, ...): each may
 * return a value or a promise of one. A plain value is used in the same tick, so the
 * synchronous path stays synchronous; a promise is awaited. A value of the wrong type
 * is never used: it becomes `TG_INVALID_CALLBACK_RESULT`, marked as the app's error, so
 * it reaches the framework's error handler like a throw.
 */
import { callbackResultError, markAppError } from '../app-errors.js';

export function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function';
}

/**
 * Runs `fn(value)` on a callback's result: at once for a plain value, after it settles
 * for a promise. Rejections and throws inside `fn` go to `fail`, marked as the app's.
 */
export function settle<T>(result: unknown, check: (v: unknown) => T, then: (v: T) => void, fail: (err: unknown) => void): void {
  if (!isThenable(result)) {
    let v: T;
    try {
      v = check(result);
    } catch (err) {
      fail(err);
      return;
    }
    then(v);
    return;
  }
  Promise.resolve(result).then(
    (r) => {
      let v: T;
      try {
        v = check(r);
      } catch (err) {
        fail(err);
        return;
      }
      then(v);
    },
    (err) => fail(markAppError(err)),
  );
}

/** A `skip` result: true or false. */
export function asSkip(path: string): (v: unknown) => boolean {
  return (v) => {
    if (v === true || v === false) return v;
    throw callbackResultError(path, 'true or false (or a promise of one)', v, 'Return a boolean: true skips the request.');
  };
}

/** A refusal `message` result: a string (sent as text) or an object (sent as JSON). */
export function asMessage(path: string): (v: unknown) => string | object {
  return (v) => {
    if (typeof v === 'string' || (typeof v === 'object' && v !== null && !isThenable(v))) return v as string | object;
    throw callbackResultError(path, 'a string or an object (or a promise of one)', v, 'Return the body to send.');
  };
}

/** Anything (a handler's or hook's return value, only awaited for its failure). */
export const asAny = (v: unknown): unknown => v;

/** Calls an app callback; whatever it throws is marked as the app's error. */
export function call<A extends unknown[]>(fn: (...args: A) => unknown, ...args: A): unknown {
  try {
    return fn(...args);
  } catch (err) {
    throw markAppError(err);
  }
}
