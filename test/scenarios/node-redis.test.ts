/**
 * The HTTP scenario suite on plain node:http (@tollgate/node) with RedisStore (a
 * redis-server started for this file on a free port) and the scenarios' ManualClock.
 */
import { nodeApp } from './node-app.js';
import { redisStores } from './redis-stores.js';
import { httpScenarios } from './scenarios.js';

const makeStore = redisStores('nsc');

httpScenarios('node:http, RedisStore', nodeApp, makeStore);
