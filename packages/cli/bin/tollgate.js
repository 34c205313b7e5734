#!/usr/bin/env node
// The `tollgate` command: a shim over the built package.

// `tollgate ... | head` closes the pipe early: that is the reader's choice, not a failure.
process.stdout.on('error', (err) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

let cli;
try {
  cli = await import('../dist/index.mjs');
} catch (err) {
  // Only the package's own build missing gets the hint; a missing dependency is reported as is.
  if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes('dist/index.mjs')) throw err;
  process.stderr.write('tollgate: the package is not built yet. Run `pnpm build` at the repository root first.\n');
  process.exit(1);
}
process.exitCode = await cli.run(process.argv.slice(2));
