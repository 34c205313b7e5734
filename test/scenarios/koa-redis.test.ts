/**
 * The HTTP scenario suite on Koa 3 with RedisStore (a redis-server started for this file
 * on a free port) and the scenarios' ManualClock. Every store call must reach Redis: a
 * failure answered by the store's local fallback would hide a broken script.
 */
import { koaApp } from './koa-app.js';
import { redisStores } from './redis-stores.js';
import { httpScenarios } from './scenarios.js';

httpScenarios('Koa 3, RedisStore', koaApp(), redisStores('ksc'));
