/**
 * The HTTP scenario suite on plain node:http (@tollgate/node) with the memory store.
 */
import { nodeApp } from './node-app.js';
import { httpScenarios } from './scenarios.js';

httpScenarios('node:http, MemoryStore', nodeApp);
