/**
 * The shaping scenarios (limitRate) on express5.
 */
import { express5ShapingApp } from './apps.js';
import { shapingScenarios } from './suite.js';

shapingScenarios('express5', express5ShapingApp);
