#!/usr/bin/env node
// The `tollgate` command: a shim over the built package (run `pnpm build` first).
import { run } from '../dist/esm/index.js';

// `tollgate ... | head` closes the pipe early: that is the reader's choice, not a failure.
process.stdout.on('error', (err) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});
process.exitCode = await run(process.argv.slice(2));
