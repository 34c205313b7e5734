// Types of app.mjs, for the TypeScript browser test (test/browser/playground.test.ts).
import type { Express } from 'express';

export declare const MAX_REQUESTS: number;
export declare const MAX_SPAN_MS: number;
export declare function createPlayground(options?: { now?: () => number }): { app: Express; close: () => Promise<void> };
export declare function startPlayground(options?: {
  port?: number;
  host?: string;
  now?: () => number;
}): Promise<{ url: string; close: () => Promise<void> }>;
