/**
 * The HTTP scenario suite on Fastify 5 with the memory store, twice: over real loopback
 * sockets (`app.listen`), and in-process through `app.inject` with the scenario's
 * client address as `remoteAddress`.
 */
import { fastifyApp } from './fastify-app.js';
import { httpScenarios } from './scenarios.js';

httpScenarios('Fastify 5 over sockets, MemoryStore', fastifyApp('socket'));
httpScenarios('Fastify 5 via app.inject, MemoryStore', fastifyApp('inject'));
