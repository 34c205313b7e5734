/**
 * The control scenarios on Hono 4 on @hono/node-server, memory stores and Redis.
 */
import { honoControlApp } from './hono-app.js';
import { redisControlStores } from './redis-stores.js';
import { controlScenarios } from './suite.js';

controlScenarios('Hono 4 on @hono/node-server, memory stores', honoControlApp);

controlScenarios('Hono 4 on @hono/node-server, Redis', honoControlApp, redisControlStores('h'));
