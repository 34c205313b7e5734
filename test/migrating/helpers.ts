/**
 * Shared by the migration tests (docs/migrating.md): each recipe drives the peer library
 * and its tollgate equivalent with the same request sequence, on a time both read.
 *
 * The peers' memory stores read `Date.now()`, and so does tollgate's default clock, so
 * faking `Date` alone (timers, sockets and supertest stay real) moves both together.
 */
import type { Store, StoreDecision } from '@tollgate/core';
import { vi } from 'vitest';

/** A fixed start that is not on a minute boundary, so clock-aligned and first-request windows differ. */
export const T0 = Date.UTC(2026, 0, 1, 12, 0, 5);

/** Fakes `Date` only, at `T0 + ms`. Call `vi.useRealTimers()` after each test. */
export function at(ms: number): void {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(T0 + ms);
}

export interface Item {
  name: string;
  params: Record<string, string>;
}

/**
 * A structured-field list of items (`"ip";q=3;w=60, "b"; r=1; t=5`) as name and
 * parameters, whatever the optional spaces after `;` (RFC 9651 allows them).
 */
export function items(header: string | string[] | undefined): Item[] {
  if (header === undefined) return [];
  const text = Array.isArray(header) ? header.join(', ') : header;
  return text.split(/,\s*/).map((member) => {
    const [name = '', ...params] = member.split(/;\s*/);
    return { name: name.replace(/^"|"$/g, ''), params: Object.fromEntries(params.map((p) => p.split('=') as [string, string])) };
  });
}

/** Only the listed parameters of each item (a peer may add others, such as a `pk` of its own). */
export function pick(list: Item[], keys: string[]): Item[] {
  return list.map(({ name, params }) => ({
    name,
    params: Object.fromEntries(keys.filter((k) => k in params).map((k) => [k, params[k] as string])),
  }));
}

/** A tollgate store whose every call fails, as one whose backend is down. */
export function brokenStore(): Store {
  const fail = (): Promise<never> => Promise.reject(new Error('store down'));
  return {
    consume: fail as () => Promise<StoreDecision>,
    peek: fail as () => Promise<StoreDecision>,
    refund: fail,
    reset: fail,
    close: () => Promise.resolve(),
  };
}
