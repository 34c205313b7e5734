/**
 * The concurrency slots' script (see `../concurrency.ts`, source in lua/slots.lua): acquire,
 * renew and count a slot key's leases atomically. It runs as it is under EVALSHA, and as the
 * body of the library's slots function (see index.ts), whose parameters are named KEYS and ARGV.
 */
import { createHash } from 'node:crypto';
import { SLOTS_LUA } from './generated.js';

/** The script behind acquire, renew and count. KEYS[1] slot key; ARGV op, id, max, lease, now. */
export const SLOT_SCRIPT = SLOTS_LUA;

export const SLOT_SCRIPT_SHA = createHash('sha1').update(SLOT_SCRIPT).digest('hex');
