/**
 * The HTTP scenario suite on Hono 4 served by @hono/node-server, MemoryStore.
 */
import { honoApp } from './hono-app.js';
import { httpScenarios } from './scenarios.js';

httpScenarios('Hono on @hono/node-server, MemoryStore', honoApp);
