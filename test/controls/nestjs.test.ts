/**
 * The control scenarios on NestJS, on its Express and Fastify platforms, memory stores and
 * Redis.
 */
import { nestControlApp } from './nestjs-app.js';
import { redisControlStores } from './redis-stores.js';
import { controlScenarios } from './suite.js';

controlScenarios('NestJS on Express, memory stores', nestControlApp('express'));
controlScenarios('NestJS on Fastify, memory stores', nestControlApp('fastify'));
controlScenarios('NestJS on Express, Redis', nestControlApp('express'), redisControlStores('n'));
controlScenarios('NestJS on Fastify, Redis', nestControlApp('fastify'), redisControlStores('m'));
