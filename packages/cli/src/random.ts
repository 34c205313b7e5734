/**
 * A small seeded pseudo-random generator, so that a Poisson pattern with a given seed
 * produces the same arrivals on every machine and in every release.
 *
 * A Weyl sequence (add the golden-ratio constant) run through a 32-bit avalanche
 * mixer: cheap, stateless apart from one integer, and good enough to draw
 * inter-arrival times. Not for anything that needs unpredictability.
 */

/** Returns a function giving numbers in [0, 1), determined by `seed`. */
export function seededRandom(seed: number): () => number {
  let state = seed | 0;
  return function next(): number {
    state = (state + 0x9e3779b9) | 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    z ^= z >>> 16;
    return (z >>> 0) / 4_294_967_296;
  };
}
