/**
 * The HTTP scenario suite on NestJS 12 with the memory store, on Nest's Express and
 * Fastify platforms, over real loopback sockets.
 */
import { nestApp } from './nestjs-app.js';
import { httpScenarios } from './scenarios.js';

httpScenarios('NestJS on Express, MemoryStore', nestApp('express'));
httpScenarios('NestJS on Fastify, MemoryStore', nestApp('fastify'));
