/**
 * The control scenarios on node:http, memory stores and Redis.
 */
import { nodeControlApp } from './node-app.js';
import { redisControlStores } from './redis-stores.js';
import { controlScenarios } from './suite.js';

controlScenarios('node:http, memory stores', nodeControlApp);

controlScenarios('node:http, Redis', nodeControlApp, redisControlStores('n'));
