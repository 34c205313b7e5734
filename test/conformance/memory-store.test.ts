/** MemoryStore passes the store conformance suite (SPEC 6.1, 6.2). */
import { MemoryStore } from '@tollgate/core';
import { storeContract } from './store-contract.js';

storeContract('MemoryStore', (clock) => new MemoryStore({ clock }));
