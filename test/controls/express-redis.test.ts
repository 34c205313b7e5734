/**
 * The control scenarios on Express 5 with Redis: `RedisStore` for the limiter and the
 * throttle, `RedisSlotStore` for concurrency slots, a real redis-server, supplied clocks.
 */
import express5 from 'express';
import { expressControlApp } from './express-app.js';
import { redisControlStores } from './redis-stores.js';
import { controlScenarios } from './suite.js';

controlScenarios('Express 5, Redis', expressControlApp(express5), redisControlStores('s'));
