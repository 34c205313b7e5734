/**
 * The HTTP scenario suite on Hono 4 on @hono/node-server with RedisStore (a redis-server
 * started for this file on a free port) and the scenarios' ManualClock. Every store call
 * must reach Redis: a failure answered by the store's local fallback would hide a broken
 * script.
 */
import { honoApp } from './hono-app.js';
import { redisStores } from './redis-stores.js';
import { httpScenarios } from './scenarios.js';

httpScenarios('Hono on @hono/node-server, RedisStore', honoApp, redisStores('hsc'));
