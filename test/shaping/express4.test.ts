/**
 * The shaping scenarios (limitRate) on express4.
 */
import { express4ShapingApp } from './apps.js';
import { shapingScenarios } from './suite.js';

shapingScenarios('express4', express4ShapingApp);
