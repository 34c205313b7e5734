/**
 * The HTTP scenario suite on Koa 3 (@tollgate/koa with @koa/router) with the memory store.
 */
import { koaApp } from './koa-app.js';
import { httpScenarios } from './scenarios.js';

httpScenarios('Koa 3, MemoryStore', koaApp);
