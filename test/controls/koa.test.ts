/**
 * The control scenarios on Koa 3 (memory stores and Redis) and Koa 2 (memory stores).
 */
import Koa2 from 'koa2';
import { koaControlApp } from './koa-app.js';
import { redisControlStores } from './redis-stores.js';
import { controlScenarios } from './suite.js';

controlScenarios('Koa 3, memory stores', koaControlApp());
controlScenarios('Koa 2, memory stores', koaControlApp(Koa2));

controlScenarios('Koa 3, Redis', koaControlApp(), redisControlStores('k'));
