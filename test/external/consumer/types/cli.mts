import { generateArrivals, parsePattern, policyFromFlags, run, simulate } from '@tollgate/cli';

const policy = policyFromFlags('fixed-window', { limit: '10', window: '1m' });
const arrivals = generateArrivals([parsePattern('burst 20 at 0s')], { limit: 10, windowMs: 60_000 });
export const result = simulate(policy, arrivals);
export const exitCode: Promise<number> = run(['simulate', '--help']);
