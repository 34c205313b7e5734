// Parses each file named on the command line as Node would load it (`.cjs` as a CommonJS
// body, anything else as an ES module), runs nothing, and prints one JSON line: the files
// that do not parse, each with Node's message and the line `node --check` names.
// Run with --experimental-vm-modules (vm.SourceTextModule parses without linking).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import vm from 'node:vm';

const failures = [];
for (const file of process.argv.slice(2)) {
  const code = readFileSync(file, 'utf8');
  try {
    if (file.endsWith('.cjs')) vm.compileFunction(code, ['exports', 'require', 'module', '__filename', '__dirname']);
    else new vm.SourceTextModule(code, { identifier: file });
  } catch (err) {
    // The vm error carries no position; node --check names the line (only the failures pay for it).
    const check = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8' });
    const line = Number(new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:(\\d+)`).exec(check.stderr)?.[1] ?? 1);
    failures.push({ file, line, message: String(err.message) });
  }
}
console.log(JSON.stringify(failures));
