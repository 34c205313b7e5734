/**
 * Slot stores for the concurrency limit: where in-flight requests hold
 * their slots. One small interface; `MemorySlotStore` here, `RedisSlotStore` in
 * @tollgate/redis.
 *
 * A slot is a lease named by the request's id. A store that `leases` (Redis) gives it
 * an expiry that the holder renews while the request runs, so an instance that dies
 * cannot keep its slots for ever. The memory store does not need leases: its slots
 * die with the process that holds them.
 */
import { TollgateError } from '../errors.js';

/** The answer to `acquire`. */
export interface SlotGrant {
  acquired: boolean;
  /** Slots held under the key after the call (including this one when acquired). */
  inFlight: number;
}

export interface SlotStore {
  /** Slots expire unless renewed (`renew` must then be called within `leaseMs`). */
  readonly leases: boolean;
  /** Other processes share these slots, so a slot can free up without a local release. */
  readonly shared: boolean;
  /** Takes a slot under `key` for `id` iff fewer than `max` are held. */
  acquire(key: string, id: string, max: number, leaseMs: number): Promise<SlotGrant>;
  /** Gives back `id`'s slot; releasing one that is not held is a no-op. */
  release(key: string, id: string): Promise<void>;
  /** Extends `id`'s lease to `leaseMs` from now; false when the lease was already lost. */
  renew(key: string, id: string, leaseMs: number): Promise<boolean>;
  /** Slots held under `key` now. */
  count(key: string): Promise<number>;
  close(): Promise<void>;
}

/**
 * In-process slots: a set of holder ids per key, dropped when empty, so memory is
 * proportional to the requests in flight.
 */
export class MemorySlotStore implements SlotStore {
  readonly leases = false;
  readonly shared = false;
  readonly #held = new Map<string, Set<string>>();
  #closed = false;

  #check(): void {
    if (this.#closed) throw new TollgateError('TG_STORE_CLOSED', 'MemorySlotStore: used after close(). Create a new store.');
  }

  acquire(key: string, id: string, max: number): Promise<SlotGrant> {
    this.#check();
    let ids = this.#held.get(key);
    if (ids === undefined) {
      ids = new Set();
      this.#held.set(key, ids);
    }
    if (ids.has(id)) return Promise.resolve({ acquired: true, inFlight: ids.size });
    if (ids.size >= max) return Promise.resolve({ acquired: false, inFlight: ids.size });
    ids.add(id);
    return Promise.resolve({ acquired: true, inFlight: ids.size });
  }

  release(key: string, id: string): Promise<void> {
    const ids = this.#held.get(key);
    if (ids?.delete(id) && ids.size === 0) this.#held.delete(key);
    return Promise.resolve();
  }

  renew(key: string, id: string): Promise<boolean> {
    return Promise.resolve(this.#held.get(key)?.has(id) === true);
  }

  count(key: string): Promise<number> {
    return Promise.resolve(this.#held.get(key)?.size ?? 0);
  }

  /** Keys with at least one slot held (for leak checks). */
  get keys(): number {
    return this.#held.size;
  }

  close(): Promise<void> {
    this.#held.clear();
    this.#closed = true;
    return Promise.resolve();
  }
}
