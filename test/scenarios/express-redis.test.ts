/**
 * The HTTP scenario suite on Express 5 and Express 4 with RedisStore (a redis-server
 * started for this file on a free port). Time is the scenarios' ManualClock, passed to
 * the store, so nothing waits for real expiry. Every store call must reach Redis: a
 * failure answered by the store's local fallback would hide a broken script.
 */
import express5 from 'express';
import express4 from 'express4';
import { expressApp } from './express-app.js';
import { redisStores } from './redis-stores.js';
import { httpScenarios } from './scenarios.js';

const makeStore = redisStores('sc');

httpScenarios('Express 5, RedisStore', expressApp(express5), makeStore);
httpScenarios('Express 4, RedisStore', expressApp(express4 as unknown as typeof express5), makeStore);
