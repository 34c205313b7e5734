/**
 * The app's callbacks at request time (skip, message, handler, delay, ...): each may
 * return a value or a promise of one. A plain value is used in the same tick, so the
 * synchronous path stays synchronous; a promise is awaited. A value of the wrong type
 * is never used: it becomes `TG_INVALID_CALLBACK_RESULT`, marked as the app's error, so
 * it reaches the framework's error handler like a throw.
 */
import { callbackResultError, markAppError } from '../app-errors.js';
import { messageContentType } from '../response.js';

export function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function';
}

/**
 * Runs `then(value)` on a callback's result: at once for a plain value, after it settles
 * for a promise. Rejections and throws in `check` go to `fail`, marked as the app's; a
 * throw in a later `then` goes to `fail` too (on a promise's branch nothing else would
 * catch it: an unhandled rejection).
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
      try {
        then(v);
      } catch (err) {
        fail(err);
      }
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

/** A refusal `message` result: a string (sent as text) or an object JSON can write (sent as JSON). */
export function asMessage(path: string): (v: unknown) => string | object {
  const body = asMessageBody(path);
  return (v) => {
    body(v);
    return v as string | object;
  };
}

/** A refusal body, its content type and text, ready to send. */
export interface MessageBody {
  contentType: string;
  text: string;
}

/**
 * A refusal `message` result as the body to send: a string as text, an object as its
 * JSON. An object `JSON.stringify` cannot write (a circular one, one holding a BigInt, a
 * `toJSON` giving nothing) is a wrong value, like a number: a coded error, never a throw
 * while sending.
 */
export function asMessageBody(path: string): (v: unknown) => MessageBody {
  const expected = 'a string or an object JSON can write (or a promise of one)';
  const fix = 'Return the body to send: text, or a plain object without cycles or BigInt values.';
  return (v) => {
    if (typeof v === 'string') return { contentType: messageContentType(v), text: v };
    if (typeof v !== 'object' || v === null || isThenable(v)) throw callbackResultError(path, expected, v, fix);
    let text: unknown;
    try {
      text = JSON.stringify(v);
    } catch {
      throw callbackResultError(path, expected, v, fix);
    }
    if (typeof text !== 'string') throw callbackResultError(path, expected, v, fix);
    return { contentType: messageContentType(v), text };
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
