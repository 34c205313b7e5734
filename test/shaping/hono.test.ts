/**
 * The shaping scenarios (limitRate) on hono (Web stream bodies, on @hono/node-server).
 */
import { honoShapingApp } from './apps.js';
import { shapingScenarios } from './suite.js';

shapingScenarios('hono', honoShapingApp);
