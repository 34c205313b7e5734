/** MemoryStore passes the store conformance suite. */
import { MemoryStore } from '@tollgate/core';
import { keyOpsContract } from './key-ops-contract.js';
import { storeContract } from './store-contract.js';

storeContract('MemoryStore', (clock) => new MemoryStore({ clock }));
keyOpsContract('MemoryStore', (clock) => new MemoryStore({ clock }));
