/**
 * The HTTP scenario suite on Express 5 and Express 4 with the memory store.
 */
import express5 from 'express';
import express4 from 'express4';
import { type ExpressFactory, expressApp } from './express-app.js';
import { httpScenarios } from './scenarios.js';

httpScenarios('Express 5, MemoryStore', expressApp(express5));
httpScenarios('Express 4, MemoryStore', expressApp(express4 as unknown as ExpressFactory));
