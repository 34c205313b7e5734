/** MemoryStore passes the store conformance suite. */
import { MemoryStore } from '@tollgate/core';
import { storeContract } from './store-contract.js';

storeContract('MemoryStore', (clock) => new MemoryStore({ clock }));
