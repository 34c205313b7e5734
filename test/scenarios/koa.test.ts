/**
 * The HTTP scenario suite on Koa 3 and Koa 2 (@tollgate/koa with @koa/router) with the
 * memory store.
 */
import Koa2 from 'koa2';
import { koaApp } from './koa-app.js';
import { httpScenarios } from './scenarios.js';

httpScenarios('Koa 3, MemoryStore', koaApp());
httpScenarios('Koa 2, MemoryStore', koaApp(Koa2));
