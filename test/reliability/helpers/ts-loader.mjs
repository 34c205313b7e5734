// `node --import ./ts-loader.mjs child.ts`: registers ts-hooks.mjs (TypeScript sources and
// the @tollgate/* aliases) for a child process of the reliability suite.
import { register } from 'node:module';

register('./ts-hooks.mjs', import.meta.url);
