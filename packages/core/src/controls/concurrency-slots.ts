/**
 * The slots one concurrency limit holds in its `SlotStore`: taken all or nothing (the
 * per-key slot and the global one), given back exactly once, and with a store that
 * `leases` (Redis) renewed by one background timer, so a crashed instance's slots
 * expire on their own.
 */
import { publishInFlight } from '../diagnostics.js';
import type { ConcurrencyFigures } from './concurrency.js';
import type { ConcurrencySettings } from './concurrency-options.js';
import type { SlotGrant } from './slot-store.js';
import type { TimerHandle } from './timers.js';

/** One try at taking a request's slots: the slot keys taken, or the limit that refused. */
export type Attempt =
  | { ok: true; taken: string[]; figures: ConcurrencyFigures[] }
  | { ok: false; scope: 'key' | 'global'; figures: ConcurrencyFigures[] };

export class HeldSlots<R> {
  readonly #s: ConcurrencySettings<R>;
  /** Slot keys each admitted request holds, by request id. */
  readonly #held = new Map<string, string[]>();
  #renewTimer: TimerHandle | undefined;
  #closed = false;

  constructor(settings: ConcurrencySettings<R>) {
    this.#s = settings;
  }

  /** Requests holding slots now. */
  get size(): number {
    return this.#held.size;
  }

  /** Takes the request's per-key slot (under `key`) and the global one, or neither. */
  async attempt(key: string | undefined, id: string): Promise<Attempt> {
    const { store, max, global, name, leaseMs } = this.#s;
    const figures: ConcurrencyFigures[] = [];
    const taken: string[] = [];
    if (key !== undefined && max !== undefined) {
      const slot = this.#s.keySlot(key);
      const g = await store.acquire(slot, id, max, leaseMs);
      figures.push({ name, scope: 'key', limit: max, inFlight: g.inFlight });
      if (!g.acquired) return { ok: false, scope: 'key', figures };
      taken.push(slot);
    }
    if (global !== undefined) {
      let g: SlotGrant;
      try {
        g = await store.acquire(this.#s.globalSlot, id, global, leaseMs);
      } catch (err) {
        // Never keep half a pair: the per-key slot goes back before the failure surfaces.
        await Promise.allSettled(taken.map((slot) => store.release(slot, id)));
        throw err;
      }
      figures.push({ name: this.#s.globalName, scope: 'global', limit: global, inFlight: g.inFlight });
      if (!g.acquired) {
        // All or nothing: give back the per-key slot taken a moment ago.
        await this.giveBack(taken, id);
        if (figures[0]?.scope === 'key') figures[0].inFlight--;
        return { ok: false, scope: 'global', figures };
      }
      taken.push(this.#s.globalSlot);
    }
    return { ok: true, taken, figures };
  }

  /** Gives back slots taken for a request that will not hold them. */
  giveBack(taken: readonly string[], id: string): Promise<unknown> {
    return Promise.all(taken.map((slot) => this.#s.store.release(slot, id)));
  }

  /** Records the slots an admitted request holds until {@link release}. */
  hold(id: string, taken: string[]): void {
    this.#held.set(id, taken);
    publishInFlight(this.#s.name, 'concurrency', this.#held.size, this.#s.global);
    this.#scheduleRenewal();
  }

  /** Gives back an admitted request's slots; resolves once the store has them (undefined when it held none). */
  release(id: string): Promise<unknown> | undefined {
    const slots = this.#held.get(id);
    this.#held.delete(id);
    publishInFlight(this.#s.name, 'concurrency', this.#held.size, this.#s.global);
    if (slots === undefined || slots.length === 0) return undefined;
    return this.giveBack(slots, id);
  }

  /** Stops renewing; held slots then lapse with their leases. */
  close(): void {
    this.#closed = true;
    if (this.#renewTimer !== undefined) this.#s.timers.clearTimeout(this.#renewTimer);
    this.#renewTimer = undefined;
  }

  #scheduleRenewal(): void {
    const { store, timers, leaseMs } = this.#s;
    if (!store.leases || this.#renewTimer !== undefined || this.#held.size === 0 || this.#closed) return;
    this.#renewTimer = timers.setTimeout(
      () => {
        this.#renewTimer = undefined;
        const renewals: Promise<boolean>[] = [];
        for (const [id, slots] of this.#held) for (const slot of slots) renewals.push(store.renew(slot, id, leaseMs));
        Promise.allSettled(renewals).finally(() => this.#scheduleRenewal());
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    timers.unref?.(this.#renewTimer);
  }
}
