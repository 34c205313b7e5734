/**
 * The HTTP scenario suite on NestJS 12 with RedisStore (a redis-server started for this
 * file on a free port), on Nest's Express and Fastify platforms. Time is the scenarios'
 * ManualClock, passed to the store. A handler's stack is one decision, as on Fastify: the
 * deny cache is off for the reason given in fastify-redis.test.ts.
 */
import { nestApp } from './nestjs-app.js';
import { redisStores } from './redis-stores.js';
import { httpScenarios } from './scenarios.js';

const makeStore = redisStores('nsc', { denyCache: false });

httpScenarios('NestJS on Express, RedisStore', nestApp('express'), makeStore);
httpScenarios('NestJS on Fastify, RedisStore', nestApp('fastify'), makeStore);
