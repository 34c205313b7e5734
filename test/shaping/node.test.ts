/**
 * The shaping scenarios (limitRate) on node.
 */
import { nodeShapingApp } from './apps.js';
import { shapingScenarios } from './suite.js';

shapingScenarios('node', nodeShapingApp);
