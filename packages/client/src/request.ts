/**
 * Retry safety: which calls may be sent more than once, and how each attempt's
 * arguments are rebuilt.
 *
 * A call is retried only when (1) its method is idempotent (RFC 9110 9.2.2: GET, HEAD,
 * OPTIONS, PUT, DELETE) or it carries an `Idempotency-Key` header
 * (draft-ietf-httpapi-idempotency-key-header), and (2) its body can be sent again: no
 * body, or one held in memory (string, ArrayBuffer, typed array, Blob, FormData,
 * URLSearchParams). A body given as a stream (ReadableStream, async iterable, Node
 * stream) is consumed by the first attempt and is never replayed. A `Request` object's
 * body is replayed through `Request.clone()`, which keeps a copy in memory.
 */

/** What fetch accepts as its first argument (a URL string, a URL or a Request). */
export type FetchInput = Parameters<typeof fetch>[0];

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);
const KEY_FOR = new Set(['POST', 'PATCH']);

/** One call, normalised once; `args(signal)` builds a fresh argument pair per attempt. */
export interface PreparedCall {
  url: URL;
  method: string;
  /** The caller's signal (init.signal, else the Request's). */
  signal: AbortSignal | undefined;
  retryable: boolean;
  args(signal: AbortSignal): [FetchInput, RequestInit];
}

/** True for bodies that can be sent again unchanged. */
export function isReplayableBody(body: unknown): boolean {
  if (body === undefined || body === null || typeof body === 'string') return true;
  if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) return true;
  if (body instanceof URLSearchParams) return true;
  if (typeof Blob !== 'undefined' && body instanceof Blob) return true;
  if (typeof FormData !== 'undefined' && body instanceof FormData) return true;
  return false;
}

/**
 * Normalises `(input, init)`. Returns `undefined` when the URL cannot be parsed: the call
 * is then handed to the underlying fetch unchanged, which reports the error its own way.
 */
export function prepareCall(
  input: FetchInput,
  init: RequestInit | undefined,
  generateKey: (() => string) | undefined,
): PreparedCall | undefined {
  const request = typeof Request !== 'undefined' && input instanceof Request ? input : undefined;
  let url: URL;
  try {
    url = new URL(request ? request.url : input instanceof URL ? input.href : String(input));
  } catch {
    return undefined;
  }
  const method = (init?.method ?? request?.method ?? 'GET').toUpperCase();
  // As in fetch: headers in init replace the Request's headers.
  const headers = new Headers(init?.headers !== undefined ? init.headers : request?.headers);
  if (generateKey && KEY_FOR.has(method) && !headers.has('idempotency-key')) headers.set('idempotency-key', generateKey());

  const body = init && 'body' in init && init.body !== undefined ? init.body : undefined;
  const requestBody = body === undefined && request !== undefined && request.body !== null;
  const replayable = requestBody || isReplayableBody(body);
  const retryable = replayable && (IDEMPOTENT.has(method) || headers.has('idempotency-key'));

  return {
    url,
    method,
    signal: init?.signal ?? request?.signal ?? undefined,
    retryable,
    args(signal) {
      const next: RequestInit = { ...init, headers: new Headers(headers), signal };
      return [request ? request.clone() : input, next];
    },
  };
}
