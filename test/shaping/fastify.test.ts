/**
 * The shaping scenarios (limitRate) on fastify.
 */
import { fastifyShapingApp } from './apps.js';
import { shapingScenarios } from './suite.js';

shapingScenarios('fastify', fastifyShapingApp);
