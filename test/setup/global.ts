/**
 * Global test setup. Redis processes are started by the Redis helpers when a suite
 * needs them (see test/setup/redis.ts); this file only checks the environment.
 */
export default function setup(): void {}
