/** The algorithms by name (each one entry of the registry, registry.ts). */
import type { AlgorithmName } from '../types.js';
import { registry } from './registry.js';
import type { Algorithm } from './types.js';

/** The public face of each algorithm: its `check`, `refund` and `expiresAt`. */
export const algorithms: Readonly<Record<AlgorithmName, Algorithm>> = registry;

export { ALGORITHM_CODES, ALGORITHM_NAMES, registry, takersOf, takesOption } from './registry.js';
export type { Algorithm, AlgorithmDef, AlgorithmOption, Check, Kernel, Reading, ReadingName, State } from './types.js';
export { CHARGE_MAX, LOG_CHARGE_MAX, Verdict } from './types.js';
