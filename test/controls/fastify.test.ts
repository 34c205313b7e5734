/**
 * The control scenarios on Fastify 5, memory stores and Redis.
 */
import { fastifyControlApp } from './fastify-app.js';
import { redisControlStores } from './redis-stores.js';
import { controlScenarios } from './suite.js';

controlScenarios('Fastify 5, memory stores', fastifyControlApp);

controlScenarios('Fastify 5, Redis', fastifyControlApp, redisControlStores('f'));
