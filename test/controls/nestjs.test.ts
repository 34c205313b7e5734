/**
 * The control scenarios on NestJS, on its Express and Fastify platforms (memory stores).
 */
import { nestControlApp } from './nestjs-app.js';
import { controlScenarios } from './suite.js';

controlScenarios('NestJS on Express, memory stores', nestControlApp('express'));
controlScenarios('NestJS on Fastify, memory stores', nestControlApp('fastify'));
