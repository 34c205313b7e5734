/**
 * The shaping scenarios (limitRate) on koa.
 */
import { koaShapingApp } from './apps.js';
import { shapingScenarios } from './suite.js';

shapingScenarios('koa', koaShapingApp);
