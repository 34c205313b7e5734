// Types of app.mjs, for the TypeScript test (test/metrics/prometheus.test.ts).
import type { Express } from 'express';

export declare function createMetricsApp(): { app: Express; close: () => Promise<void> };
export declare function startMetricsApp(options?: { port?: number; host?: string }): Promise<{ url: string; close: () => Promise<void> }>;
export declare function burst(url: string, tenants?: Record<string, number>): Promise<Record<string, number[]>>;
