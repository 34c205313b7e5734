/**
 * The shaping scenarios (limitRate) on NestJS, on its Express and Fastify platforms.
 */
import { nestShapingApp } from './nestjs-app.js';
import { shapingScenarios } from './suite.js';

shapingScenarios('NestJS on Express', nestShapingApp('express'));
shapingScenarios('NestJS on Fastify', nestShapingApp('fastify'));
