/**
 * The calls an operator makes (operations by key and `reset`), as opposed to decisions:
 * no failure policy answers them and no breaker stands in their way, so each either did
 * what was asked or rejects with a code that says what is known.
 *
 * - Redis refused or could not be reached (an error reply such as `NOPERM` from an ACL, a
 *   lost connection): `TG_STORE_ERROR`, with the error as its `cause`.
 * - No answer within `timeoutMs` to a change: `TG_STORE_UNCONFIRMED`. The call was handed
 *   to the client, and a frozen or slow Redis (or the client's offline queue) may still
 *   run it later, so it may have been applied; docs/operations.md has the safe retry. A
 *   read (`get`) has nothing to apply: `TG_STORE_TIMEOUT`.
 */
import { TollgateError } from '@tollgate/core';
import { timeoutError } from './errors.js';

export function unconfirmedError(operation: string, ms: number): TollgateError {
  return new TollgateError(
    'TG_STORE_UNCONFIRMED',
    `RedisStore: ${operation} was sent but Redis did not answer within timeoutMs (${ms} ms): it may have been applied, now or later. ` +
      'Read the key (get) before acting again, or retry with the same operation id (docs/operations.md).',
  );
}

export function operatorError(operation: string, cause: unknown): TollgateError {
  if (cause instanceof TollgateError) return cause;
  const text = cause instanceof Error ? cause.message : String(cause);
  return new TollgateError(
    'TG_STORE_ERROR',
    `RedisStore: ${operation} did not happen: Redis answered ${JSON.stringify(text)}.`,
    undefined,
    {
      cause,
    },
  );
}

/** `call`, settled within `ms`: its value, or one of the errors above (`read`: a `get`). */
export function operatorCall<T>(call: () => Promise<T>, operation: string, ms: number, read = false): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let reply: Promise<T>;
    try {
      reply = call();
    } catch (err) {
      reject(operatorError(operation, err));
      return;
    }
    const timer = setTimeout(() => reject(read ? timeoutError(ms) : unconfirmedError(operation, ms)), ms);
    reply.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        // After the deadline this settles nothing (the caller has its answer) and is handled.
        clearTimeout(timer);
        reject(operatorError(operation, err));
      },
    );
  });
}
