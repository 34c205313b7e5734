/**
 * The HTTP scenario suite on Fastify 5 with RedisStore (a redis-server started for this
 * file on a free port), over sockets and via `app.inject`. Time is the scenarios'
 * ManualClock, passed to the store, so nothing waits for real expiry. Every store call
 * must reach Redis: a failure answered by the store's local fallback would hide a
 * broken script.
 */
import { fastifyApp } from './fastify-app.js';
import { redisStores } from './redis-stores.js';
import { httpScenarios } from './scenarios.js';

// The deny cache is off: a route's stack is one decision here, and the cache answers a
// repeat of a refused stack with that refusal's figures (docs of packages/redis/src/deny-cache.ts),
// so a scenario that spends another rule of the stack in between would see the rules named
// by the earlier refusal. The Express Redis run covers the cache.
const makeStore = redisStores('fsc', { denyCache: false });

httpScenarios('Fastify 5 over sockets, RedisStore', fastifyApp('socket'), makeStore);
httpScenarios('Fastify 5 via app.inject, RedisStore', fastifyApp('inject'), makeStore);
