import { createFetch, parseRetryAfter, TollgateClientError } from '@tollgate/client';

const politeFetch: typeof fetch = createFetch({ pace: '45/s', timeoutMs: 10_000 });
export const res: Promise<Response> = politeFetch('http://127.0.0.1:1/items');
export const wait: number | undefined = parseRetryAfter('120', 0);
export const isClientError = (err: unknown): boolean => err instanceof TollgateClientError;
