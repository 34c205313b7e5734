/**
 * The control scenarios on Express 5 and Express 4, memory stores.
 */
import express5 from 'express';
import express4 from 'express4';
import { type ExpressFactory, expressControlApp } from './express-app.js';
import { controlScenarios } from './suite.js';

controlScenarios('Express 5, memory stores', expressControlApp(express5));
controlScenarios('Express 4, memory stores', expressControlApp(express4 as unknown as ExpressFactory));
