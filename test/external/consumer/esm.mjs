// ES module consumer: import every installed @tollgate package (and subpath) and check its public names
// (exports.json; a package not listed there must still load and export something).
import { readFileSync } from 'node:fs';

const packages = JSON.parse(readFileSync(new URL('./packages.json', import.meta.url), 'utf8'));
const expected = JSON.parse(readFileSync(new URL('./exports.json', import.meta.url), 'utf8'));
const problems = [];
for (const name of packages) {
  const mod = await import(name);
  const names = expected[name] ?? [];
  if (Object.keys(mod).length === 0) problems.push(`${name} exports nothing`);
  for (const n of names) if (mod[n] === undefined) problems.push(`${name}.${n} missing`);
}
if (problems.length) {
  console.error(`esm: ${problems.join(', ')}`);
  process.exit(1);
}
const { createLimiter, constant } = await import('@tollgate/core');
const d = await createLimiter({ rules: [{ name: 'esm', key: constant('k'), rate: '1/s' }] }).consume({});
console.log(`esm ok ${packages.length} ${d.allowed}`);
